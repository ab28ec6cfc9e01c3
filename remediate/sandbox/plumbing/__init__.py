"""What every kind of sandbox starts and stops: processes by pid (process.py), a standalone
ZooKeeper (zkserver.py) and one sshd per broker (sshd.py)."""
