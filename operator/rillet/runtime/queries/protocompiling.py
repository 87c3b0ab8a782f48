"""`.proto` text to descriptors, by protoc (the driver's, at planning; never per record).

The protobuf runtime builds descriptors from FileDescriptorProtos only; the text of a schema (an
inline one, or one a registry serves as text: protofiles' docstring) needs a compiler. protoc is
the reference one, and grpcio-tools carries it as a Python package (no binary to fetch), with
the well-known types' `.proto` files. It runs as a child process: it reports errors on its
standard error, which a child's is ours to read, and a schema's mistake cannot take the driver
down. The built-in files and the schema's resolved imports go in as a descriptor set
(`--descriptor_set_in`), so an import needs no `.proto` text on disk.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from google.protobuf import descriptor_pb2

from rillet.runtime.queries import protofiles

# A schema of thousands of lines compiles in well under a second (60 ms for a small one here).
_TIMEOUT_S = 60


def compile_text(
    text: str, *, name: str, imports: Sequence[descriptor_pb2.FileDescriptorProto] = ()
) -> protofiles.ProtoFiles:
    """The files of a `.proto` text named `name` (its imports resolved from `imports`, other
    than built-in ones), imports first; raises ProtoSchemaError with protoc's message."""
    known = descriptor_pb2.FileDescriptorSet()
    for serialized in protofiles.BUILTIN_FILES:
        known.file.add().ParseFromString(serialized)
    known.file.extend(f for f in imports if not protofiles.is_builtin(f.name))
    with tempfile.TemporaryDirectory(prefix="rillet-protoc-") as scratch:
        root = Path(scratch)
        (root / "in.pb").write_bytes(known.SerializeToString())
        source = root / "src" / name
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text(text)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "grpc_tools.protoc",
                f"--descriptor_set_in={root / 'in.pb'}",
                f"--descriptor_set_out={root / 'out.pb'}",
                "--include_imports",
                f"--proto_path={root / 'src'}",
                name,
            ],
            capture_output=True,
            text=True,
            timeout=_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            message = done.stderr.replace(f"{root / 'src'}/", "").strip()
            raise protofiles.ProtoSchemaError(f"{name} does not compile: {message}")
        compiled = descriptor_pb2.FileDescriptorSet.FromString((root / "out.pb").read_bytes())
    return protofiles.ProtoFiles.of(compiled.file)


def files_of(
    schema: str, *, name: str, imports: Sequence[descriptor_pb2.FileDescriptorProto] = ()
) -> protofiles.ProtoFiles:
    """The files of a schema in either form a registry serves (protofiles.registered_file),
    or inline: a base64 descriptor as it is, text compiled (named `name`)."""
    file = protofiles.registered_file(schema)
    if file is None:
        return compile_text(schema, name=name, imports=imports)
    return protofiles.ProtoFiles.of([*imports, file])
