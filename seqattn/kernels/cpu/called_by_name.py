"""Large CPU functions compiled once and called by symbol name, so that their code is not copied
into every kernel that calls them.

Numba links the LLVM IR of every function a kernel calls into that kernel's own module, then
optimizes the whole module and emits its machine code: a callee of half a megabyte of IR
(register_gemm's register blocks) was optimized and emitted again for each of the twenty-odd
kernels that reach it, most of a first run's compilation (BENCHMARKS.md, "The first run").

``called_by_name(symbol, signature)(py_func)`` compiles ``py_func`` as a ``numba.cfunc``
(cached on disk like the kernels) when a kernel that calls it is first compiled or loaded,
registers its address with LLVM under ``symbol``, and returns an intrinsic that calls it with
one tuple of arguments. A calling kernel's module holds only a declaration of the symbol, which
the JIT resolves when it loads the kernel's machine code: freshly compiled (the intrinsic's
typing registers the symbol first) or from Numba's cache in a later process (Numba's loading of
cached code is wrapped to register every symbol named in the code before it is loaded).
Nothing is compiled at import.

The call is not inlined: use this for functions whose calls are few and long (a product over
a whole tile), never in an inner loop.

``called_natively(dispatcher)`` does the same for an @njit function whose argument types vary
from call to call (arrays, tuples, None), which one C signature cannot serve: it is compiled as
usual for the arguments of each call site, and its code is called by a symbol that its types
name, the same in every process. Numba's disk cache does not know that a caller needs it, so
whoever loads a caller from the cache must make it ready first (:func:`compile_natively`;
threads.SizedKernel does so for the chunk functions of the prange kernels).

``called_at_address(signature)`` calls such a function at an address passed in at run time
(:func:`address_of`): a kernel that takes a C function only for some sizes compiles and
loads it only when a launch of those sizes asks for its address.
"""
import hashlib

import llvmlite.binding as llvm
from llvmlite import ir
from numba import cfunc, types
from numba.core import cgutils
from numba.core.caching import FunctionCache
from numba.core.codegen import CPUCodeLibrary
from numba.core.compiler_lock import global_compiler_lock
from numba.core.registry import cpu_target
from numba.extending import intrinsic

from ..compiled_elsewhere import compiling_here, wait_for

# symbol -> (py_func, signature); the compiled C functions, kept alive while the process runs
_DEFINITIONS = {}
_COMPILED = {}


def register(symbol):
    """Compile (or load from the cache) the C function ``symbol`` and give LLVM its address;
    once per process."""
    if symbol not in _COMPILED:
        wait_for(symbol)  # a helper process compiling it into the disk cache: load it then
        py_func, signature = _DEFINITIONS[symbol]
        _COMPILED[symbol] = None  # loading the C function's own cached code comes back here
        try:
            # another process compiling it (the job and the helper reach some at once): wait
            with compiling_here(FunctionCache(py_func)._cache_path, symbol):
                compiled = cfunc(signature, cache=True)(py_func)
        except BaseException:
            del _COMPILED[symbol]
            raise
        llvm.add_symbol(symbol, compiled.address)
        _COMPILED[symbol] = compiled


def address_of(symbol):
    """The address of the C function ``symbol``, compiled or loaded on first use (register)."""
    register(symbol)
    return _COMPILED[symbol].address


def available(symbol):
    """Whether the C function ``symbol`` is registered in this process or in Numba's disk
    cache (loading it from there takes milliseconds)."""
    if _COMPILED.get(symbol) is not None:
        return True
    py_func, signature = _DEFINITIONS[symbol]
    with global_compiler_lock:
        return FunctionCache(py_func).load_overload(signature,
                                                    cpu_target.target_context) is not None


def _registering_first(unserialize):
    """Numba's loading of a cached library, after registering the symbols its code names."""
    def load(cls, codegen, state):
        _, kind, data = state
        code = data[0] if kind == "object" else data
        for symbol in _DEFINITIONS:
            if symbol.encode() in code:
                register(symbol)
        return unserialize(cls, codegen, state)
    load.wrapped = unserialize
    return classmethod(load)


if not hasattr(CPUCodeLibrary._unserialize, "wrapped"):
    CPUCodeLibrary._unserialize = _registering_first(CPUCodeLibrary._unserialize.__func__)


def called_by_name(symbol, signature):
    """A decorator: ``py_func`` compiled with ``signature`` (scalar arguments), called from
    @njit code as ``f((arg0, arg1, ...))``."""
    def decorate(py_func):
        _DEFINITIONS[symbol] = (py_func, signature)
        return _caller(symbol, signature)
    return decorate


def called_at_address(signature):
    """An intrinsic, called from @njit code as ``f(address, (arg0, arg1, ...))``: the C
    function of ``signature`` at ``address`` (an integer from :func:`address_of`), which the
    calling kernel neither compiles nor names."""
    arity = len(signature.args)

    @intrinsic
    def call(typingctx, address, arguments):
        if not isinstance(address, types.Integer) or not isinstance(
                arguments, types.BaseTuple) or len(arguments) != arity:
            return None

        def codegen(context, builder, sig, args):
            function = builder.inttoptr(args[0], _function_type(context, signature).as_pointer())
            return _call(context, builder, function, signature, arguments, args[1])
        return signature.return_type(address, arguments), codegen
    return call


def _function_type(context, signature):
    """The type of numba.cfunc's C wrapper."""
    return ir.FunctionType(context.get_value_type(signature.return_type),
                           [context.get_value_type(t) for t in signature.args])


def _call(context, builder, function, signature, arguments, values):
    """Call ``function`` with the tuple ``values`` of types ``arguments``, cast to the
    ``signature``'s."""
    values = [context.cast(builder, builder.extract_value(values, i), arguments[i], t)
              for i, t in enumerate(signature.args)]
    result = builder.call(function, values)
    if signature.return_type == types.void:
        return context.get_dummy_value()
    return result


def _caller(symbol, signature):
    arity = len(signature.args)

    @intrinsic
    def call(typingctx, arguments):
        if not isinstance(arguments, types.BaseTuple) or len(arguments) != arity:
            return None
        register(symbol)  # before the calling kernel's code is linked

        def codegen(context, builder, sig, args):
            function = cgutils.get_or_insert_function(
                builder.module, _function_type(context, signature), symbol)
            return _call(context, builder, function, signature, arguments, args[0])
        return signature.return_type(arguments), codegen
    return call


# Numba-compiled functions called by symbol: symbol -> their compile result (kept loaded)
_NATIVE = {}


def native_symbol(dispatcher, argtypes):
    """The symbol of ``dispatcher``'s code for ``argtypes``: the same in every process (Numba's
    own mangled names carry a per-process counter), so that a cached caller finds it."""
    py_func = dispatcher.py_func
    key = ",".join(str(t) for t in argtypes)
    return (f"seqattn_native_{py_func.__module__}.{py_func.__qualname__}_"
            f"{hashlib.sha256(key.encode()).hexdigest()[:20]}")


def compile_natively(dispatcher, argtypes):
    """Compile (or load from the cache) ``dispatcher`` for ``argtypes`` and give LLVM the address
    of its code under :func:`native_symbol`; returns that symbol and its compile result. A
    kernel that calls it through :func:`called_natively` must have it registered before its own
    code is compiled or loaded (the intrinsic's typing registers it for a fresh compilation;
    threads.SizedKernel for a load)."""
    argtypes = tuple(argtypes)
    symbol = native_symbol(dispatcher, argtypes)
    if symbol not in _NATIVE:
        with global_compiler_lock:
            dispatcher.compile(argtypes)
            compiled = dispatcher.overloads[argtypes]
            llvm.add_symbol(symbol, compiled.library.get_pointer_to_function(
                compiled.fndesc.llvm_func_name))
            _NATIVE[symbol] = compiled
    return symbol, _NATIVE[symbol]


def called_natively(dispatcher):
    """An intrinsic, called from @njit code as ``f((arg0, arg1, ...))``: ``dispatcher`` (an
    @njit function) compiled on its own for the arguments' types and called by symbol, its
    code neither inlined nor linked into the caller (an exception it raises propagates)."""
    @intrinsic
    def call(typingctx, arguments):
        if not isinstance(arguments, types.BaseTuple):
            return None
        argtypes = tuple(arguments)
        symbol, compiled = compile_natively(dispatcher, argtypes)
        return_type = compiled.signature.return_type

        def codegen(context, builder, sig, args):
            function = cgutils.get_or_insert_function(
                builder.module, context.call_conv.get_function_type(return_type, argtypes),
                symbol)
            values = [builder.extract_value(args[0], i) for i in range(len(argtypes))]
            status, result = context.call_conv.call_function(builder, function, return_type,
                                                             argtypes, values)
            with cgutils.if_unlikely(builder, status.is_error):
                context.call_conv.return_status_propagate(builder, status)
            return result
        return return_type(arguments), codegen
    return call
