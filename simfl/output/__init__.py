"""What a run leaves behind: result files, checked tables, reports, figures, recordings, trackers.

Reads and writes files and observes the simulation's state; knows nothing of scenarios or launching.
"""
