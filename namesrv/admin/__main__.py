from namesrv.admin.cli import run

run()
