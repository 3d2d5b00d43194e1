"""``cudaAgent/results`` ``{uri?}``: the stored results of the workspace (or of one file), for the results view."""

from __future__ import annotations

from pathlib import Path

from pygls.uris import to_fs_path

from server import protocol as wire
from server.lsp import CudaLanguageServer


def results_payload(ls: CudaLanguageServer, uri: str | None) -> wire.Results:
    """Every stored record as it is kept (:class:`agent.records.KernelResults`), by file and kernel."""
    files = ls.store.all()
    if uri is not None:
        od = ls.document(uri)
        key = ls.store.key(od.path if od is not None else Path(to_fs_path(uri) or uri))
        files = {key: files.get(key, {})}
    return wire.Results(
        [
            wire.KernelEntry(f, k, r)
            for f, per_file in sorted(files.items())
            for k, r in sorted(per_file.items())
        ]
    )


def setup(ls: CudaLanguageServer) -> None:
    @ls.feature(wire.RESULTS_REQUEST)
    def results(ls: CudaLanguageServer, params: wire.ResultsParams) -> wire.Results:
        return results_payload(ls, params.uri)
