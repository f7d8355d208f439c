"""Generate the Python code for protos/ into libs/mcpd (messages, gRPC stubs, typing stubs).

The output is committed; CI runs this script and fails when `git diff` shows a change.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import grpc_tools
from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTOS = ROOT / "protos"
VENDOR = ROOT / "third_party" / "googleapis"
OUT = ROOT / "libs"
# mypy-protobuf's plugins are installed next to the interpreter running this script.
BIN = Path(sys.executable).parent
DESCRIPTOR_SET = OUT / "mcpd" / "descriptors.binpb"
WELL_KNOWN = Path(grpc_tools.__file__).parent / "_proto"


def generated_packages() -> list[Path]:
    """Every versioned proto package directory, such as protos/mcpd/query/v1."""
    return sorted({p.parent for p in PROTOS.rglob("*.proto")})


def clean() -> None:
    for package in generated_packages():
        target = OUT / package.relative_to(PROTOS)
        if target.exists():
            shutil.rmtree(target)


def generate() -> None:
    files = sorted(str(p.relative_to(PROTOS)) for p in PROTOS.rglob("*.proto"))
    args = [
        "grpc_tools.protoc",
        f"-I{PROTOS}",
        f"-I{VENDOR}",
        f"-I{WELL_KNOWN}",
        f"--plugin=protoc-gen-mypy={BIN / 'protoc-gen-mypy'}",
        f"--plugin=protoc-gen-mypy_grpc={BIN / 'protoc-gen-mypy_grpc'}",
        f"--python_out={OUT}",
        f"--grpc_python_out={OUT}",
        f"--mypy_out={OUT}",
        # Concrete servicer stubs: services fill the RPCs that have not landed with
        # `pending_rpcs`, so no servicer is abstract.
        "--mypy_grpc_opt=generate_concrete_servicer_stubs",
        f"--mypy_grpc_out={OUT}",
        # Descriptors with source info carry the proto comments, which become OpenAPI descriptions.
        f"--descriptor_set_out={DESCRIPTOR_SET}",
        "--include_source_info",
        *files,
    ]
    if protoc.main(args) != 0:
        sys.exit("protoc failed")
    for package in generated_packages():
        target = OUT / package.relative_to(PROTOS)
        for directory in [target, *target.parents]:
            if directory == OUT:
                break
            init = directory / "__init__.py"
            if not init.exists():
                init.write_text("")


if __name__ == "__main__":
    clean()
    generate()
