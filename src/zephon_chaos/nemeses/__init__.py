"""The harness's side of a launch's faults, one driver per kind under one protocol
(``nemeses.nemesis``, in the manner of Jepsen's nemeses): the runner loops over them. They
run in the harness only; what a rank goes through is ``zephon_chaos.faults``."""
