// Package bga2a serves a bgtask sub-agent as an A2A agent.
package bga2a
