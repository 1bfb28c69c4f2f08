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
