"""Carrying out a plan: the only part of the tool that changes a cluster."""
