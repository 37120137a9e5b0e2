module github.com/bgtask/bgtask

go 1.26.0

require (
	github.com/google/uuid v1.6.0
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
	go.uber.org/goleak v1.3.0
)

require golang.org/x/text v0.43.0 // indirect
