"""Workload kinds: what a point measures and how, each behind :class:`~experiments.kinds.base.WorkloadKind`.

A point's kind is looked up by its ``kind`` in :data:`experiments.registry.KINDS` (built in: ``train``, the
training loop reading its dataset every epoch, :mod:`experiments.kinds.train`; plug-ins through the ``ddlio.kinds``
entry-point group). The job (:mod:`experiments.run.job`) hands the kind a
:class:`~experiments.kinds.base.JobContext` (its MPI step runner, run folder, deadline and the dataset's
ensuring), so this package never imports the run side.
"""
