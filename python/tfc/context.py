"""Execution contexts: one request's bindings of a loaded CPU model
(tfc.Model.context()), several of which run at once on threads."""
import contextlib
import ctypes
import threading

from .runtime import Error, Model, _Closing, _check


class Context(_Closing):
    """One request's bindings of a loaded CPU model (Model.context()): its
    own inputs, outputs and, for a model built for several batch sizes or
    lengths, its own shape, while the library and the weights (converted
    and packed once) stay the model's. Contexts of one model run at once
    (one per thread: run() releases the GIL while the model computes), each
    serving one call at a time. close() (or `with`) destroys it; the model
    lives on until its last context is closed."""

    def __init__(self, model):
        self._context = None  # first: __del__ runs even if creating fails
        self._model, self._rt, self.path = model, model._rt, model.path
        self._busy = threading.Lock()
        self._copied = ()
        handle = ctypes.c_void_p()
        with model._exclusive("context"):
            _check(self._rt, self._rt.tfc_context_create(
                model._live(), ctypes.byref(handle)))
        self._context = handle
        model._contexts.add(self)
        # The model's handle stays valid while the context exists (the
        # runtime keeps a closed model for its contexts).
        self._model_handle = model._live()
        self._names = model._names
        self._in_buffers = [None] * len(self._names)
        self._out_buffers = [None] * len(model.outputs)

    def close(self):
        """Destroys the context (once; later calls do nothing), after a
        call under way on another thread ends."""
        busy = getattr(self, "_busy", None)
        with busy if busy is not None else contextlib.nullcontext():
            handle, self._context = getattr(self, "_context", None), None
            if handle:
                self._rt.tfc_context_destroy(handle)
        model = getattr(self, "_model", None)
        if handle and model is not None:
            model._contexts.discard(self)
            model._release_dir()

    def __repr__(self):
        return "<tfc.Context of %s>" % self.path

    def _live(self):
        """The model's handle (its signature), once the context is open."""
        if not self._context:
            raise Error("a context of model %s is closed" % self.path,
                        "FAILED_PRECONDITION")
        return self._model_handle

    def _function(self, name):
        self._live()
        return getattr(self._rt, "tfc_context_" + name), self._context

    def run(self, *inputs, gather=True, **named):
        """As Model.run, on this context's bindings."""
        with self._exclusive("run"), self._holding():
            inputs, named = self._parts(inputs, named)
            outs = self._bind(inputs, named, fresh_outputs=True)
            _check(self._rt, self._rt.tfc_context_invoke(self._context))
            return self._gathered(outs) if gather else outs

    # Binding and checking the inputs, as the model does them, through
    # _function's tfc_context_* calls.
    _exclusive = Model._exclusive
    _holding = Model._holding
    _bind = Model._bind
    _as_array = Model._as_array
    _set_size_from = Model._set_size_from
    _describe = Model._describe
    _which = Model._which
    _parts, _part, _gathered = Model._parts, Model._part, Model._gathered
    _infos = Model._infos
    inputs = Model.inputs
    outputs = Model.outputs
    copied_inputs = Model.copied_inputs
