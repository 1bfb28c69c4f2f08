"""The command line's usage errors: one line, exit 2, the usage of the command given."""
import pytest


def test_an_unknown_flag_shows_the_usage_of_its_subcommand(capsys):
    from wgk.conformance.cli.main import main
    for argv, usage in ((["replay", "x.json", "--no-such-flag"], "usage: wgk replay"),
                        (["kernel", "--db", "k.db", "status", "--no-such-flag"], "usage: wgk kernel status")):
        with pytest.raises(SystemExit) as e:
            main(argv)
        err = capsys.readouterr().err
        assert e.value.code == 2 and err.startswith(usage), err
        assert "unrecognized arguments: --no-such-flag" in err


def test_a_kernel_command_s_error_does_not_import_the_trace_format(tmp_path):
    """A kernel command's bad input is one line and exit 2 without the verification suite's
    trace format imported to say so (a process of ``wgk kernel`` pays only for its own); a
    malformed trace is still reported as bad input."""
    import subprocess
    import sys
    code = ("import sys\n"
            "from wgk.conformance.cli.main import main\n"
            "rc = main(sys.argv[1:])\n"
            "print(rc, 'wgk.conformance.traces.format' in sys.modules)\n")
    db = str(tmp_path / "k.db")
    out = subprocess.run([sys.executable, "-c", code, "kernel", "--db", db, "status"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert out.stdout.split() == ["2", "False"], (out.stdout, out.stderr)
    assert len(out.stderr.strip().splitlines()) == 1 and out.stderr.startswith("wgk kernel: ")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    out = subprocess.run([sys.executable, "-c", code, "replay", str(bad)],
                         capture_output=True, text=True, cwd=tmp_path)
    assert out.stdout.split() == ["2", "True"], (out.stdout, out.stderr)
    assert len(out.stderr.strip().splitlines()) == 1 and "bad.json" in out.stderr
