"""The console's two data sources behind one protocol: `static` (the demo and the
snapshot tests) and `live` (a profile's cluster, through the core's probes)."""
