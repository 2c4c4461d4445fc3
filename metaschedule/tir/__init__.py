"""The tensor IR: expressions, statements, buffers, blocks, PrimFunc, IRModule."""

from .buffer import Buffer, decl_buffer
from .dtype import SUPPORTED_DTYPES, check_dtype
from .expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    BinaryOp,
    BufferLoad,
    Call,
    Cast,
    CmpOp,
    CommReducer,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mul,
    Node,
    Not,
    Or,
    PrimExpr,
    Reduce,
    Select,
    StringImm,
    Sub,
    Var,
    cast,
    const,
    convert,
)
from .function import IRModule, PrimFunc
from .functor import Mutator, Visitor, post_order_visit, substitute
from .interpreter import interpret
from .op import (
    abs,
    all,
    any,
    ceil,
    cos,
    erf,
    exp,
    exp2,
    fabs,
    floor,
    floordiv,
    floormod,
    if_then_else,
    log,
    log2,
    max,
    max_value,
    min,
    min_value,
    pow,
    round,
    rsqrt,
    sigmoid,
    sin,
    sqrt,
    tanh,
    trunc,
)
from .printer import script
from .serialize import load_json, save_json
from .stmt import (
    Allocate,
    Block,
    BlockRealize,
    BufferRegion,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    IterType,
    IterVar,
    Range,
    SeqStmt,
    Stmt,
)
from .structural import assert_structural_equal, structural_equal, structural_hash
from .tensor_intrin import TensorIntrin
from .verify import IRVerifyError, verify, verify_well_formed

_SCHEDULE_NAMES = (
    "Schedule",
    "ScheduleError",
    "Trace",
    "Instruction",
    "InstructionKind",
    "BlockRV",
    "LoopRV",
    "ExprRV",
    "ScheduleState",
)


def __getattr__(name):
    # The scheduling language lives in metaschedule.schedule (it imports tir), and is
    # reachable as ms.tir.Schedule like TVM's tvm.tir.Schedule.
    if name in _SCHEDULE_NAMES:
        from .. import schedule  # local: a layer above (ALLOWED in tests/test_layers.py)

        return getattr(schedule, name)
    raise AttributeError(f"module 'metaschedule.tir' has no attribute {name!r}")
