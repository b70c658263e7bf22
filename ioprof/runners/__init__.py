"""One runner per measuring command: a config in, a result out. ``sweep``, ``place``, ``whatif``
(with ``pipelines``, the input pipelines it tries), ``scale`` (with ``rank``, what each rank runs,
and ``torchrun``, how ranks are started and their failures read), ``profile`` and ``devices``.
A runner measures and returns; the command concludes and renders.

May import: ``ioprof.measure``, ``ioprof.datasets``, ``ioprof.host``, ``ioprof.core``.
"""

__all__ = ["devices", "pipelines", "place", "profile", "rank", "scale", "sweep", "torchrun", "whatif"]
