package main

import (
	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/definition"
)

// ParamFlags give an execution its parameters (`start` and `run`).
type ParamFlags struct {
	Param      []string `name:"param" sep:"none" placeholder:"KEY=VALUE" help:"A parameter of the execution, as the definition's params: declare it (repeatable; overrides --params-file)."`
	ParamsFile string   `name:"params-file" type:"path" placeholder:"FILE.json" help:"A JSON object of parameters (strings, numbers or booleans)."`
}

// bind reads the parameters and checks them against the definition, all
// at once, before anything is written.
func (f ParamFlags) bind(def *definition.Workflow) (map[string]string, error) {
	given, err := definition.ParseParams(f.Param, f.ParamsFile)
	if err != nil {
		return nil, &cli.UsageError{Msg: err.Error()}
	}
	params, err := def.Bind(given)
	if err != nil {
		return nil, &cli.UsageError{Msg: err.Error()}
	}
	return params, nil
}
