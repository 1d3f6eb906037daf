"""The loaders, one module each behind :class:`~experiments.kernel.loaders.base.Loader`: ``native``
(:mod:`.native`), ``tf`` (:mod:`.tf`), ``torch`` (:mod:`.torch`). The kernel looks a point's ``reader`` up in
:data:`experiments.registry.LOADERS` (plug-ins included) and imports only that loader's module."""
