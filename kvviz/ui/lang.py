"""The page's language: Gradio's I18n for the static texts, the switch on the page, and the value every
handler receives as its `lang` input.

Static texts (labels, info lines, buttons, tab names, fixed Markdown) are I18n keys (L(key)): the browser
translates them from kvviz.i18n's catalogue, following its own language (a zh-CN browser gets Chinese).
Texts a handler computes (results, figures, refusals) are made on the server in the language of the switch,
a gr.Radio ("en" or "zh") that every handler takes as its last input, so an API caller passes lang too
(default "en"). On load, LOAD_JS sets the switch to the browser's language, or to the one the visitor chose
before (kept in localStorage). Moving the switch changes the browser's locale with Gradio's own
changeLocale (SWITCH_JS), then relabel() sets what the browser does not retranslate at run time: the labels of
the tabs not in view. Nothing else here computes anything.
"""

from __future__ import annotations

import gradio as gr

from kvviz.i18n import DEFAULT, LANG_NAMES, normalize, t, translations

I18N = gr.I18n(**translations())

# Gradio's frontend keeps its locale in the svelte-i18n store of its core module; importing that module again
# (the same URL, so the same instance) reaches changeLocale, which the Settings panel uses too. Its file name
# carries a hash, so it is found among the resources the page loaded. zh → zh-CN: Gradio's own texts exist
# for zh-CN, and kvviz's zh texts are its fallback.
_CHANGE_LOCALE = """
async function kvvizChangeLocale(lang) {
  const locale = lang === "zh" ? "zh-CN" : "en";
  const url = performance.getEntriesByType("resource").map(e => e.name)
      .find(n => /\\/assets\\/core-[^/]+\\.js$/.test(n));
  if (url) (await import(url)).changeLocale(locale);
  try { localStorage.setItem("kvviz_lang", lang); } catch (e) {}
}
"""
SWITCH_JS = f"async (lang) => {{ {_CHANGE_LOCALE} await kvvizChangeLocale(lang); return lang; }}"
LOAD_JS = f"""async () => {{
  {_CHANGE_LOCALE}
  let saved = null;
  try {{ saved = localStorage.getItem("kvviz_lang"); }} catch (e) {{}}
  const browser = (document.documentElement.lang || navigator.language || "en").toLowerCase();
  const lang = saved === "zh" || saved === "en" ? saved : (browser.startsWith("zh") ? "zh" : "en");
  const shown = (document.documentElement.lang || "").toLowerCase().startsWith("zh") ? "zh" : "en";
  if (lang !== shown) await kvvizChangeLocale(lang);
  return lang;
}}"""


def L(key: str) -> gr.i18n.I18nData:
    """A static text for a component, translated in the browser from the catalogue's key (a short name: it
    wraps every label on the page)."""
    t(key)  # KeyError now, at build time, for a key the catalogue lacks
    return I18N(key)


def language_switch() -> gr.Radio:
    """The page's language switch; its value ("en" or "zh") is every handler's `lang` input.

    Its value reaches a handler normalized (kvviz.i18n.normalize): an API caller may send lang as zh-CN, or junk,
    and gets a language rather than the radio's refusal of a value outside its choices (the page only ever sends
    "en" or "zh"). Set on the instance: a subclass of a Gradio component makes Gradio write a .pyi stub beside it.
    """
    switch = gr.Radio([(name, lang) for lang, name in LANG_NAMES.items()], value=DEFAULT, label=L("app.language"),
                      elem_id="lang-switch", scale=0, min_width=160)
    switch.preprocess = normalize
    return switch


def tab_labels(lang: object, keys: list[str]) -> list[gr.Tab]:
    """Updates that set each tab's label in `lang`, for the tabs the browser does not retranslate."""
    return [gr.Tab(label=t(key, normalize(lang))) for key in keys]
