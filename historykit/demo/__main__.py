"""`python -m historykit.demo` (`make demo`)."""

from historykit.demo._command import main

if __name__ == "__main__":
    raise SystemExit(main())
