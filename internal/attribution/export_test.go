package attribution

// Read returns the CPU of the cgroup the process pid is in, whatever
// container it is in: ReadContainer without the check, for the tests of the
// cgroup walk.
func (r *CgroupCPUReader) Read(pid int) (ContainerCPU, error) {
	return r.read(pid, "", false)
}
