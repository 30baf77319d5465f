module github.com/orreryhq/orrery

go 1.26

require (
	google.golang.org/protobuf v1.36.12
	pgregory.net/rapid v1.3.0
)
