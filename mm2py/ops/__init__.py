"""Operator tools behind the command line: status, failover, verify."""
