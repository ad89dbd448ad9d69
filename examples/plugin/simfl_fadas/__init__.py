"""FADAS, federated adaptive asynchronous optimization, as a simfl algorithm plugin."""

from simfl_fadas.fadas import FADAS, FADASConfig

__all__ = ["FADAS", "FADASConfig"]
