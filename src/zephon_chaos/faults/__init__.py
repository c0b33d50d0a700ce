"""What a fault goes through on a rank's side: the store and directory interposers a rank's
calls pass, the Toxiproxy-compatible proxy and its control channel. A rank and the harness
both import it; the harness's drivers of a launch's faults are ``zephon_chaos.nemeses``."""
