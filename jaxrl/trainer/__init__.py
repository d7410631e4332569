"""The compiled program: :func:`~jaxrl.trainer.loop.make_train` (init, chunks of
updates in one ``lax.scan``, vmapped over members), in-program evaluation
(:mod:`~jaxrl.trainer.evaluate`) and population-based training
(:mod:`~jaxrl.trainer.pbt`). Reads only the algorithm contract."""
