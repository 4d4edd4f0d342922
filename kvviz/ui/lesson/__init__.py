"""The lesson's guided path through the app: tab. Its answers are kvviz.lesson; its text is in kvviz.i18n.lesson."""
