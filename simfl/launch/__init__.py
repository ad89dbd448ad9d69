"""Launching scenarios: from a validated scenario to published result folders.

A scenario's (cell, entry, seed) runs become units (:mod:`~simfl.launch.units`) that run here,
in worker processes or as Ray tasks (:mod:`~simfl.launch.parallel`); one process writes the
folders (:mod:`~simfl.launch.runner`, :mod:`~simfl.launch.checkpoint`). :mod:`~simfl.launch.experiment`
builds one run from its parts; :mod:`~simfl.launch.grid` is ``simfl sweep``; :mod:`~simfl.launch.api`
is ``simfl.run``/``simfl.sweep``. The top layer below the command line.
"""
