"""kvviz's user interface: the Gradio app, one folder per feature. The core never imports this.

A feature's folder holds its tab (`tab.py`: the builder that lays the tab out and wires its events), the text it
writes and the figures it draws (plain functions, no gradio); its words, English and Chinese, are in the catalogue of
the same name, kvviz/i18n/<feature>.py. Adding a number to a tab touches that folder and that catalogue only.

    calculator/  tab, answer (one position of the controls answered), figures        i18n/calculator.py
    generation/  tab (live generation), live (a run's record as it streams), text,  i18n/generation.py
                 figures (one run's, also drawn by compare), lifecycle_tab,
                 history_tab, history (the session's runs)
    compare/     tab, text (the verdict and the modes' table)                        i18n/compare.py
    batch/       tab, run_text, run_figures (one batch), sweep_text, sweep_figures    i18n/batch.py
    serving/     tab, plan (the page's values checked), text, figures                 i18n/serving.py
    lesson/      tab (the guided path; its answers are kvviz.lesson)                  i18n/lesson.py

Shared by every feature, at this level: app (the page and its cross-tab wiring), common (starting and following a
worker job, the model controls; words in i18n/common.py), lang (the page's language), figures (the layout, colours
and marker lines every figure shares), sessions, worker (the device process), serve (the app started as a user
starts it). Units and number formats (times, bytes, rates) come from kvviz.base.units, one rule per unit.
A feature imports the shared modules and, where it reuses one, another feature's text or figures; a shared module
imports no feature, but app (which assembles them) and common (the time limit's sentence, generation/text's).
"""
