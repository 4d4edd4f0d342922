"""A real serving engine under load: tab, plan (the page's values checked into a serving Plan), text, figures.
Its text is in kvviz.i18n.serving."""
