//go:build mpi

package dist_test

import "testing"

// TestMPIMasterArgInterfaces is TestMasterArgInterfaces under mpirun
// -n 2: arguments holding interface values cross to rank 1's process,
// whose codelets assert the dynamic Go type of each; arguments holding
// an unregistered type are refused at Submit.
func TestMPIMasterArgInterfaces(t *testing.T) {
	runCasesUnderMPI(t, "TestMPIMasterArgInterfaces", runIfaceCases, len(ifaceCases()))
}
