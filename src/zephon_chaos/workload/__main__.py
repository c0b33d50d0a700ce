import sys

from zephon_chaos.workload.main import main

sys.exit(main())
