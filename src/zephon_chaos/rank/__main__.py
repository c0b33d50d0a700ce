import sys

from zephon_chaos.rank.main import main

sys.exit(main())
