"""Downloads (``simfl data fetch``, ``download: true``) from a local HTTP server: success, bad checksum, no server.

The download table is replaced by one pointing at small generated files served
from a thread on 127.0.0.1; no test reaches the internet.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import http.server
import socket
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from simfl.cli import main
from simfl.data import download
from simfl.data.cifar import Cifar10
from simfl.data.download import SOURCES, Remote, Source, fetch
from simfl.data.har import Har
from simfl.data.mnist import Mnist
from simfl.data.verify import UNPACKED_DIGESTS
from simfl.errors import InputError

from .helpers import write_cifar, write_mnist
from .test_har import write_uci_har

pytestmark = pytest.mark.data  # reads the data folder or ../shared: also run without them (.ci/run)

PART = {"kind": "iid", "clients": 2}


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Requests to 127.0.0.1 go straight to the local server, whatever proxy the environment names."""
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A folder served over HTTP on 127.0.0.1, and its base URL."""
    folder = tmp_path / "served"
    folder.mkdir()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(folder)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield folder, f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


def md5(path: Path) -> str:
    return "md5:" + hashlib.md5(path.read_bytes(), usedforsecurity=False).hexdigest()


def serve_mnist(folder: Path, url: str, monkeypatch: pytest.MonkeyPatch, corrupt: bool = False) -> None:
    write_mnist(folder)  # the four .gz files
    real = SOURCES["mnist"]
    files = tuple(Remote(r.name, (url + r.name,), "md5:" + "0" * 32 if corrupt else md5(folder / r.name))
                  for r in real.files)
    monkeypatch.setitem(SOURCES, "mnist", Source("mnist", real.page, real.folder, files, real.unpack, real.ready))
    monkeypatch.setitem(UNPACKED_DIGESTS, "mnist", {  # the generated files' own, standing in for MNIST's
        r.name[:-3]: "md5:" + hashlib.md5(gzip.decompress((folder / r.name).read_bytes())).hexdigest() for r in files})


def test_fetch_mnist_then_load_through_torchvision(server: tuple[Path, str], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    folder, url = server
    serve_mnist(folder, url, monkeypatch)
    root = tmp_path / "data"
    assert main(["data", "fetch", "mnist", "--root", str(root), "--quiet"]) == 0
    raw = root / "MNIST" / "raw"
    assert sorted(p.name for p in raw.iterdir()) == sorted([*(r.name for r in SOURCES["mnist"].files),
                                                            *(r.name[:-3] for r in SOURCES["mnist"].files)])
    loaded = Mnist.load(Mnist.Config(root=root, partition=PART))
    direct = Mnist.load(Mnist.Config(root=folder, partition=PART))
    assert torch.equal(loaded.x_train, direct.x_train) and torch.equal(loaded.y_test, direct.y_test)
    assert main(["data", "fetch", "mnist", "--root", str(root), "--quiet"]) == 0  # already there: nothing to do


def test_download_true_fetches_into_the_default_folder(server: tuple[Path, str], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    folder, url = server
    serve_mnist(folder, url, monkeypatch)
    monkeypatch.setenv("SIMFL_DATA", str(tmp_path / "cache"))
    with pytest.raises(InputError, match="simfl data fetch mnist$"):
        Mnist.load(Mnist.Config(partition=PART))  # never downloads unless asked
    d = Mnist.load(Mnist.Config(partition=PART, download=True))
    assert d.x_train.shape == (30, 1, 28, 28) and (tmp_path / "cache" / "MNIST" / "raw").is_dir()


def test_checksum_mismatch_is_one_line_and_leaves_nothing(server: tuple[Path, str], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    folder, url = server
    serve_mnist(folder, url, monkeypatch, corrupt=True)
    root = tmp_path / "data"
    assert main(["data", "fetch", "mnist", "--root", str(root), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "md5 checksum mismatch" in err and f"{url}train-images-idx3-ubyte.gz" in err
    assert list((root / "MNIST" / "raw").iterdir()) == []


def test_unreachable_server_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/cifar-10-python.tar.gz"
    monkeypatch.setitem(SOURCES, "cifar10", Source("cifar10", "page", ".", (Remote("c.tar.gz", (url,), None),)))
    with pytest.raises(InputError) as err:
        fetch("cifar10", tmp_path, progress=False)
    assert f"{url}: download failed" in str(err.value) and "\n" not in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_second_mirror_after_a_failing_one(server: tuple[Path, str], tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    folder, url = server
    (folder / "f.bin").write_bytes(b"payload" * 1000)
    remote = Remote("f.bin", (url + "absent.bin", url + "f.bin"), md5(folder / "f.bin"))
    assert download.download(remote, tmp_path / "out", progress=True).read_bytes() == b"payload" * 1000
    captured = capsys.readouterr()
    assert "f.bin" in captured.err and "6.84k" in captured.err and captured.out == ""  # the progress bar, on stderr
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["f.bin"]


def test_fetch_cifar10_unpacks_for_torchvision(server: tuple[Path, str], tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    folder, url = server
    write_cifar(folder, 10, archive=True)
    name = "cifar-10-python.tar.gz"
    real = SOURCES["cifar10"]
    monkeypatch.setitem(SOURCES, "cifar10", Source("cifar10", real.page, ".", (Remote(name, (url + name,),
                                                   md5(folder / name)),), real.unpack, real.ready))
    root = tmp_path / "data"
    d = Cifar10.load(Cifar10.Config(root=root, partition=PART, download=True))
    assert (root / "cifar-10-batches-py" / "test_batch").is_file() and d.x_train.shape == (30, 3, 32, 32)
    assert not [p for p in root.iterdir() if p.name.startswith(".")]  # no staging folder left


def test_fetch_har_unpacks_the_nested_uci_zip(server: tuple[Path, str], tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    folder, url = server
    write_uci_har(tmp_path / "src", {"train": 6, "test": 4})
    inner = tmp_path / "UCI HAR Dataset.zip"
    with zipfile.ZipFile(inner, "w") as z:
        for p in sorted((tmp_path / "src").rglob("*")):
            z.write(p, p.relative_to(tmp_path / "src"))
        z.writestr("__MACOSX/._junk", b"x")
    with zipfile.ZipFile(folder / "har.zip", "w") as z:
        z.write(inner, "UCI HAR Dataset.zip")
        z.writestr("UCI HAR Dataset.names", "names")
    real = SOURCES["har"]
    monkeypatch.setitem(SOURCES, "har", Source("har", real.page, ".", (Remote("har.zip", (url + "har.zip",), None),),
                                               real.unpack, real.ready))
    root = tmp_path / "data"
    assert fetch("har", root, progress=False) == root
    assert Har.load(Har.Config(root=root, partition=PART)).x_train.shape == (6, 9, 128)
    assert not (root / "__MACOSX").exists() and not (root / "UCI HAR Dataset.zip").exists()


def test_unknown_dataset_and_bad_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["data", "fetch", "imagenet"]) == 2
    assert "cannot download 'imagenet'; it downloads: mnist, cifar10, cifar100, newsgroups, har, hapt" in capsys.readouterr().err
    assert main(["data"]) == 2


def test_archive_member_outside_the_folder_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.zip"
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr("../escape.txt", "x")
    (tmp_path / "root").mkdir()
    with pytest.raises(InputError, match="outside the target folder"):
        download.unzip(bad, tmp_path / "root")
    assert not (tmp_path / "escape.txt").exists()


@pytest.mark.parametrize("filtered", [True, False])
@pytest.mark.parametrize("name", ["../escape.txt", "link"])
def test_tar_member_outside_the_folder_is_refused(name: str, filtered: bool, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """With tarfile's ``data`` filter and without it (Python 3.11 before 3.11.4): a member that would land outside
    ``root`` (a parent path, a link out) refuses the archive in one line, and nothing is unpacked."""
    import io
    import tarfile

    if not filtered:
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    elif not hasattr(tarfile, "data_filter"):
        pytest.skip("this Python's tarfile has no data filter")
    bad = tmp_path / "bad.tar.gz"
    with tarfile.open(bad, "w:gz") as tar:
        member = tarfile.TarInfo(name)
        if name == "link":
            member.type, member.linkname = tarfile.SYMTYPE, "/etc/passwd"
            tar.addfile(member)
        else:
            member.size = 1
            tar.addfile(member, io.BytesIO(b"x"))
    (tmp_path / "root").mkdir()
    with pytest.raises(InputError, match="cannot unpack"):
        download.untar(bad, tmp_path / "root")
    assert not (tmp_path / "escape.txt").exists() and list((tmp_path / "root").iterdir()) == []


def test_recorded_checksums() -> None:
    """The official figures recorded for each source (see the module docstring for where they come from)."""
    digests = {r.name: r.digest for s in SOURCES.values() for r in s.files}
    assert digests["train-images-idx3-ubyte.gz"] == "md5:f68b3c2dcbeaaa9fbdd348bbdeb94873"
    assert digests["cifar-10-python.tar.gz"] == "md5:c58f30108f718f92721af3b95e74349a"
    assert digests["cifar-100-python.tar.gz"] == "md5:eb9058c3a382ffc7106e4002c42a8d85"
    assert digests["20news-bydate.tar.gz"] == "sha256:8f1b2514ca22a5ade8fbb9cfa5727df95fa587f4c87b786e15c759fa66d95610"
    assert all(u.startswith(("https://", "http://")) for s in SOURCES.values() for r in s.files for u in r.urls)


def write_hapt_raw(raw: Path) -> None:
    """Two experiments of UCI HAPT RawData: user 1 (a training subject) and user 2 (a test subject)."""
    import numpy as np

    gen = np.random.default_rng(3)
    raw.mkdir(parents=True)
    for exp, user, n in ((1, 1, 400), (2, 2, 300)):
        for kind in ("acc", "gyro"):
            np.savetxt(raw / f"{kind}_exp{exp:02d}_user{user:02d}.txt", gen.normal(size=(n, 3)), fmt="%.9e")
    (raw / "labels.txt").write_text("1 1 5 10 209\n1 1 7 210 229\n1 1 1 230 399\n2 2 4 0 149\n2 2 6 150 299\n")


def test_hapt_npz_from_raw_recordings(tmp_path: Path) -> None:
    """labels.txt start and end are 0-based and inclusive; unlabelled samples are -1."""
    from simfl.data.hapt_raw import hapt_arrays

    write_hapt_raw(tmp_path / "RawData")
    a = hapt_arrays(tmp_path / "RawData")
    assert a["signals"].shape == (700, 6) and a["signals"].dtype.name == "float32"
    assert a["label"][:10].tolist() == [-1] * 10 and a["label"][10] == 5 and a["label"][209] == 5
    assert a["label"][210] == 7 and a["label"][399] == 1 and a["label"][400] == 4 and a["label"][699] == 6
    assert a["user"][[0, 399, 400]].tolist() == [1, 1, 2] and a["experiment"][[399, 400]].tolist() == [1, 2]
    assert len(a["uci_har_train_subjects"]) == 21 and len(a["uci_har_test_subjects"]) == 9


def test_fetch_hapt_builds_hapt_raw_npz(server: tuple[Path, str], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from simfl.data.har import Hapt

    folder, url = server
    write_hapt_raw(tmp_path / "src" / "RawData")
    with zipfile.ZipFile(folder / "hapt.zip", "w") as z:
        for p in sorted((tmp_path / "src").rglob("*")):
            z.write(p, p.relative_to(tmp_path / "src"))
    real = SOURCES["hapt"]
    monkeypatch.setitem(SOURCES, "hapt", Source("hapt", real.page, ".", (Remote("hapt.zip", (url + "hapt.zip",), None),),
                                                real.unpack, real.ready))
    root = tmp_path / "data"
    d = Hapt.load(Hapt.Config(root=root, partition=PART, download=True, window=32, step=16))
    assert d.groups_train is not None and set(d.groups_train.tolist()) == {1} and len(d.y_test) > 0
    assert sorted(p.name for p in root.iterdir()) == ["hapt.zip", "hapt_raw.npz"]


def test_connection_closed_early_keeps_nothing(tmp_path: Path) -> None:
    """A server that promises 1000 bytes and sends 10: one line naming the URL, no file left."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def serve_once() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(4096)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n0123456789")

    thread = threading.Thread(target=serve_once, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/x.bin"
    try:
        with pytest.raises(InputError) as err:
            download.download(Remote("x.bin", (url,), None), tmp_path, progress=False)
    finally:
        thread.join(5)
        listener.close()
    assert f"{url}: download failed" in str(err.value) and "\n" not in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_fetch_newsgroups_checks_sha256(server: tuple[Path, str], tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    folder, url = server
    (folder / "20news-bydate.tar.gz").write_bytes(b"not really an archive")
    good = "sha256:" + hashlib.sha256(b"not really an archive").hexdigest()
    real = SOURCES["newsgroups"]
    root = tmp_path / "data"
    for digest, ok in (("sha256:" + "f" * 64, False), (good, True)):
        remote = Remote("20news-bydate.tar.gz", (url + "20news-bydate.tar.gz",), digest)
        monkeypatch.setitem(SOURCES, "newsgroups", Source("newsgroups", real.page, ".", (remote,), None, real.ready))
        if ok:
            fetch("newsgroups", root, progress=False)
        else:
            with pytest.raises(InputError, match="sha256 checksum mismatch"):
                fetch("newsgroups", root, progress=False)
        assert (root / "20news-bydate.tar.gz").is_file() == ok and len(list(root.iterdir())) == int(ok)
