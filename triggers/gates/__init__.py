"""The gates' services (SPEC §13): the keyed state a gate node reads and writes, safe
under any number of workers racing on one key. ``throttles``: the throttle's sliding
window counters; ``batches``: a batch (digest)."""
