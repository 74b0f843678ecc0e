"""The records probe: scenario 16's measurements (bench/records.py) at a size of one's choosing.

``python -m bench.records_probe [--total MiB] [--rss] [--rss-size MiB] [--rounds N]`` prints the
rows as JSON lines (the same as ``python -m bench.records``).
"""

from bench.records import main

if __name__ == "__main__":
    main()
