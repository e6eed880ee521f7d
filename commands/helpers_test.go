package commands_test

import "github.com/meshctl/mesh/commands/commandstest"

// The controller's tests call the helpers they share with the tests beside
// each service (commandstest) by the names they always had, so that a test
// body reads as before the services' tests moved out.
var (
	controller      = commandstest.Controller
	controllerIn    = commandstest.ControllerIn
	enroll          = commandstest.Enroll
	code            = commandstest.Code
	writeKey        = commandstest.WriteKey
	startOn         = commandstest.StartOn
	checkAfterFault = commandstest.CheckAfterFault
)
