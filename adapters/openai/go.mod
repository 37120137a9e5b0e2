module github.com/bgtask/bgtask/adapters/openai

go 1.26.0

require (
	github.com/bgtask/bgtask v0.1.0
	github.com/openai/openai-go/v3 v3.96.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/coder/websocket v1.8.15 // indirect
	github.com/tidwall/gjson v1.20.0 // indirect
	github.com/tidwall/match v1.2.0 // indirect
	github.com/tidwall/pretty v1.2.1 // indirect
	github.com/tidwall/sjson v1.2.5 // indirect
)
