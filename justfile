# The mesh's recipes. `just` alone lists them.

# list the recipes
default:
    @just --list

# run the single-box mesh: embedded NATS and the controller, state in ./.mesh
up:
    go run ./cmd/mesh up

# run every test (what CI runs, with gofmt and vet)
test:
    go test ./...

# the whole suite ten times in a row (n runs) with two busy loops beside
# it, stopping at the first failure (issue 30: steady under load; a run's
# time and why it is not under 60 s: docs/performance.md, "The test suite")
stress n="10":
    .ci/stress {{n}}

# the CI script exactly as CI runs it
ci:
    .ci/run

# benchmarks, each a ratio against raw JetStream in the same run
bench:
    go test ./events/store/ -run '^$' -bench AppendVsRawPublish -benchtime 20000x
    go test ./projections/ -run '^$' -bench FoldVsRawRead -benchtime 3x
    go test ./compose/ -run '^$' -bench Compose -benchtime 20000x -cpu 1
    go test ./commands/world/ -run '^$' -bench ComposeFromReadModels -benchtime 3x -cpu 1
    go test ./commands/push/ -run '^$' -bench 'BenchmarkPush$' -benchtime 3x
    go test ./agent/ -run '^$' -bench VerifyAndApplyUnchanged
    go test ./commands/status/ -run '^$' -bench 'BenchmarkStatus$' -benchtime 5x
    go test ./commands/ -run '^$' -bench ConnectAsNode -benchtime 200x
    go test ./declaration/ -run '^$' -bench Builds
    go test ./commands/history/ -run '^$' -bench 'BenchmarkAudit$' -benchtime 2x

# the long benchmarks: a stream of a million events (a few minutes)
bench-million:
    go test ./projections/ -run '^$' -bench 'BenchmarkRebuild$' -benchtime 1x -timeout 30m
    go test ./commands/history/ -run '^$' -bench 'BenchmarkHistory$' -benchtime 3x -timeout 30m
    MESH_BENCH_EVENTS=1000000 go test ./projections/ -run '^$' -bench 'BenchmarkStartFromPublished$' -benchtime 1x -timeout 30m

# an artifact of 50 MiB fetched by 100 real agents against 100 raw object-store
# gets, the CPU seconds of the bus and the controller each (issue 32; a few minutes)
bench-artifacts mib="50" agents="100":
    .ci/bench-artifacts {{mib}} {{agents}}

# the fault suite: the controller killed mid-push, a restore killed part way,
# the stream leader lost mid-push, a bus at its storage limit
fault:
    go test ./commands/ ./commands/credentials/ -run 'Fault|LosingTheStreamLeader|FullBus|LostStream|PartialRestore|OlderBackup' -count 1 -v

# the tests with the race detector
race:
    go test -race ./...

# build the mesh binary into ./mesh
build:
    go build -o mesh ./cmd/mesh
