from namesrv_pipeline.cli import main

raise SystemExit(main())
