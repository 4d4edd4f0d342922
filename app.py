"""Start kvviz's web app: `python app.py [--host H] [--port P] [--share] [--model M]`.

This file only reads the command line and launches; the app is built in kvviz.ui.app.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="kvviz: see how LLM inference really behaves")
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
                        help="address to listen on (0.0.0.0 to serve a network; default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", "7860")))
    parser.add_argument("--share", action="store_true", help="ask Gradio for a public share link")
    parser.add_argument("--model", default="tiny",
                        help="model the generation tabs start with (default tiny, the bundled model)")
    args = parser.parse_args(argv)
    from kvviz.ui.app import build_app

    # A plain exit on SIGTERM runs the clean-up that stops the device worker process with the app.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    demo = build_app(default_model=args.model)
    demo.queue(default_concurrency_limit=1)
    demo.launch(server_name=args.host, server_port=args.port, share=args.share)
    return 0


if __name__ == "__main__":
    sys.exit(main())
