"""Peers measured next to NotifyFlow (scenario 2): the same 3-step workflow on other
durable-execution libraries, run as subprocesses against the same PostgreSQL. Each peer
module is standalone (no Django): ``python -m bench.peers.<peer> setup|enqueue|worker``."""
