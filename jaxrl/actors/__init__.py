"""Host-side acting: the actor–learner pipeline that trains on host envs
(:mod:`jaxrl.actors.sebulba`)."""

from jaxrl.actors.sebulba import HostEnvError, Sebulba, UpdateReport, verdict

__all__ = ["HostEnvError", "Sebulba", "UpdateReport", "verdict"]
