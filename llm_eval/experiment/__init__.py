"""Side feature: comparing retrievers. Two runs paired query by query, variants against
a reference, latency ratios and clocks, and their renderings."""
