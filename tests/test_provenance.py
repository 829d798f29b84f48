"""Provenance: the source hash, git commit and dirty flag recorded in results.json."""

from taskextrap import provenance


def _fake_package(root):
    (root / "pkg" / "llm" / "models" / "m").mkdir(parents=True)
    (root / "pkg" / "__pycache__").mkdir()
    (root / "pkg" / "a.py").write_text("x = 1\n")
    (root / "pkg" / "llm" / "b.py").write_text("y = 2\n")
    (root / "pkg" / "llm" / "models" / "m" / "model.safetensors").write_bytes(b"\x00\x01weights")
    (root / "pkg" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"junk")
    (root / "pkg" / "notes.txt").write_text("not source")
    return root / "pkg"


def test_source_hash_covers_sources_and_model_files_only(tmp_path):
    pkg = _fake_package(tmp_path)
    names = [p.relative_to(pkg).as_posix() for p in provenance.source_files(pkg)]
    assert names == ["a.py", "llm/b.py", "llm/models/m/model.safetensors"]
    h = provenance._hash_files(pkg)
    assert len(h) == 16 and int(h, 16) >= 0
    (pkg / "notes.txt").write_text("changed")  # not hashed
    (pkg / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"other")
    assert provenance._hash_files(pkg) == h
    (pkg / "llm" / "b.py").write_text("y = 3\n")  # one source byte
    h2 = provenance._hash_files(pkg)
    assert h2 != h
    (pkg / "llm" / "models" / "m" / "model.safetensors").write_bytes(b"\x00\x02weights")  # one weight byte
    assert provenance._hash_files(pkg) != h2


def test_source_hash_of_the_package_is_cached_and_stable():
    assert provenance.source_hash() == provenance.source_hash()
    assert provenance.source_hash() == provenance._hash_files(provenance.package_dir())
    assert provenance._cached_hash.cache_info().hits >= 1


def test_git_outside_a_repository_is_none(tmp_path):
    assert provenance.git_commit(tmp_path) is None
    assert provenance.git_dirty(tmp_path) is None


def test_cpu_info_names_the_processor_and_the_kernels_instruction_set(monkeypatch):
    import platform

    import torch

    from taskextrap import provenance

    provenance.cpu_info.cache_clear()
    monkeypatch.setattr(provenance.Path, "read_text", lambda self, *a, **k: "processor : 0\nmodel name\t: Test CPU 9\n")
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    assert provenance.cpu_info() == "Test CPU 9 (AVX2)"
    provenance.cpu_info.cache_clear()  # no /proc/cpuinfo, no processor name, no torch capability: None

    def no_file(self, *a, **k):
        raise OSError("no such file")

    def no_torch():
        raise RuntimeError("no torch")

    monkeypatch.setattr(provenance.Path, "read_text", no_file)
    monkeypatch.setattr(platform, "processor", lambda: "")
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", no_torch)
    assert provenance.cpu_info() is None
    provenance.cpu_info.cache_clear()


def test_library_versions_are_a_fresh_dict_each_call():
    import numpy as np

    from taskextrap import provenance

    first = provenance.library_versions()
    first["numpy"] = "edited"
    assert provenance.library_versions()["numpy"] == np.__version__  # the cached look-up is not shared
