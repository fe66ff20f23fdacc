package attribution

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Container ids and pod UIDs of the files in testdata/cgroup.
const (
	idDocker     = "a4c123b1612dd272d1371c17149d439536b3216fdaeeb975729fae923d5a4fd1"
	idDockerV2   = "2aabfe228f219e9cb0eb53f16947ccf25ec84d8dbc74254770f58904dba41ecc"
	idBurstable  = "cc3fc1626e53a13043b026c48bbf33feff9243a8f506b40928b5b7a767c76fb0"
	idGuaranteed = "08f86bebb2737f6a6f0fb23c6f5da2cec255404e4fb440034d6608697a8d41be"
	idCgroupfs   = "d440e50454f31af3176813e02ea68ef786e4d3cea27d26934b484e73cf575dca"
	idV1Systemd  = "d6ba2b0aee0ca923732881584d8c4fa2815d2802827283e0ad84173581569969"
	idCRIO       = "e58b081006f7e3dfc967a64cb14028d512c9791e558e08baa7196b50ac2f8670"
	idPodman     = "2824c1c099724caf4941d4072014b3ce107f80e222f828767efc2f91624a8940"
	idNerdctl    = "f1f836f99eee3692f09e2e8c662248b483b7ffc050fec94dbca3a0aac36098b2"
	idKindPod    = "cc2bd818319478da6bd0c621de49f145fda9988c79fc35526f7eaed46725a2a7"
	idInnerDinD  = "e8a7f770d9106fd287db7f1adbc60926f6967e7893f57fd14c1604d115cea325"

	uidBurstable  = "a70828a7-2f7d-4a08-b0d0-a2b8544940e1"
	uidGuaranteed = "77b5abcb-bf0e-41e0-8659-2243ef95eee8"
	uidCgroupfs   = "b9b253e3-aa18-4345-8fd3-e758082a2f4d"
	uidV1Systemd  = "fc27d683-5fb6-4625-96d1-06fb60ed33a0"
	uidCRIO       = "1be4a5db-2b54-4f77-b143-6e1d54ea2061"
	uidKind       = "14ace1cb-47a1-44e4-9407-ab3300bc22cb"
	uidStatic     = "3b5f2c1e9d8a7b6c5d4e3f2a1b0c9d8e"
)

func TestParseCgroupFiles(t *testing.T) {
	tests := []struct {
		file    string
		want    Owner
		wantErr bool
	}{
		// Docker.
		{file: "docker-v1-cgroupfs.txt", want: Owner{ContainerID: idDocker}},
		{file: "docker-v2-systemd.txt", want: Owner{ContainerID: idDockerV2}},
		{file: "hybrid-v1-docker-v2-root.txt", want: Owner{ContainerID: idDockerV2}},
		{file: "docker-in-docker-v1.txt", want: Owner{ContainerID: idInnerDinD}},
		// containerd, CRI.
		{file: "containerd-v2-systemd-burstable.txt", want: Owner{ContainerID: idBurstable, PodUID: uidBurstable}},
		{file: "containerd-v2-systemd-guaranteed.txt", want: Owner{ContainerID: idGuaranteed, PodUID: uidGuaranteed}},
		{file: "containerd-v1-systemd-besteffort.txt", want: Owner{ContainerID: idV1Systemd, PodUID: uidV1Systemd}},
		{file: "containerd-v1-cgroupfs-besteffort.txt", want: Owner{ContainerID: idCgroupfs, PodUID: uidCgroupfs}},
		{file: "containerd-v2-cgroupfs-burstable.txt", want: Owner{ContainerID: idCgroupfs, PodUID: uidCgroupfs}},
		{file: "containerd-v2-driver-mismatch.txt", want: Owner{ContainerID: idBurstable, PodUID: uidBurstable}},
		{file: "containerd-v2-cgroupns-relative.txt", want: Owner{ContainerID: idKindPod, PodUID: uidKind}},
		{file: "containerd-v2-static-pod.txt", want: Owner{ContainerID: idCgroupfs, PodUID: uidStatic}},
		{file: "kind-v2-nested.txt", want: Owner{ContainerID: idKindPod, PodUID: uidKind}},
		// containerd without CRI (nerdctl).
		{file: "containerd-plain-v2-nerdctl.txt", want: Owner{ContainerID: idNerdctl}},
		{file: "containerd-plain-v2-nerdctl-systemd.txt", want: Owner{ContainerID: idNerdctl}},
		// CRI-O.
		{file: "crio-v2-systemd.txt", want: Owner{ContainerID: idCRIO, PodUID: uidCRIO}},
		{file: "crio-v1-systemd.txt", want: Owner{ContainerID: idCRIO, PodUID: uidCRIO}},
		{file: "crio-v1-cgroupfs.txt", want: Owner{ContainerID: idCRIO, PodUID: uidCRIO}},
		{file: "crio-v2-conmon.txt", want: Owner{PodUID: uidCRIO}},
		// podman.
		{file: "podman-v2-rootful.txt", want: Owner{ContainerID: idPodman}},
		{file: "podman-v2-rootless.txt", want: Owner{ContainerID: idPodman}},
		{file: "podman-v1-cgroupfs.txt", want: Owner{ContainerID: idPodman}},
		// A pod's slice with no container below it.
		{file: "pod-slice-only.txt", want: Owner{PodUID: uidBurstable}},
		// Host processes.
		{file: "host-v2-user-session.txt"},
		{file: "host-v1-user-session.txt"},
		{file: "host-v2-service.txt"},
		{file: "host-v2-init.txt"},
		// Slurm, cgroup/v2: each step's tasks, the stepd, and its scope's own.
		{file: "slurm-v2-step.txt", want: Owner{SlurmJobID: "4711", SlurmStep: "0"}},
		{file: "slurm-v2-batch.txt", want: Owner{SlurmJobID: "4711", SlurmStep: "batch"}},
		{file: "slurm-v2-extern-adopted.txt", want: Owner{SlurmJobID: "4711", SlurmStep: "extern"}},
		{file: "slurm-v2-interactive.txt", want: Owner{SlurmJobID: "4712", SlurmStep: "interactive"}},
		{file: "slurm-v2-multiple-slurmd.txt", want: Owner{SlurmJobID: "4713", SlurmStep: "2"}},
		{file: "slurm-v2-stepd.txt", want: Owner{SlurmJobID: "4711", SlurmStep: "0"}},
		{file: "slurm-v2-stepd-system.txt"},
		// Slurm, cgroup/v1 (testdata/cgroup/README.md: where the layouts come from).
		{file: "slurm-v1-step.txt", want: Owner{SlurmJobID: "4720", SlurmStep: "0"}},
		{file: "slurm-v1-batch.txt", want: Owner{SlurmJobID: "4720", SlurmStep: "batch"}},
		{file: "slurm-v1-multiple-slurmd.txt", want: Owner{SlurmJobID: "4721", SlurmStep: "0"}},
		{file: "slurm-v1-interactive.txt", want: Owner{SlurmJobID: "4722", SlurmStep: "interactive"}},
		// Malformed Slurm paths: no job, or the job without its step.
		{file: "slurm-v2-malformed-job.txt"},
		{file: "slurm-v2-malformed-step.txt", want: Owner{SlurmJobID: "4711"}},
		{file: "slurm-v1-malformed-uid.txt"},
		{file: "slurm-lookalike-user-unit.txt"},
		// Nothing, or nonsense.
		{file: "empty.txt"},
		{file: "garbage-colons.txt"},
		{file: "garbage.txt", wantErr: true},
		{file: "garbage-binary.txt", wantErr: true},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		seen[tt.file] = true
		t.Run(strings.TrimSuffix(tt.file, ".txt"), func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "cgroup", tt.file))
			require.NoError(t, err)
			got, err := parseCgroup(bytes.NewReader(data))
			if tt.wantErr {
				require.Error(t, err)
				assert.Zero(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	// Every file in testdata/cgroup has its case.
	files, err := filepath.Glob(filepath.Join("testdata", "cgroup", "*.txt"))
	require.NoError(t, err)
	for _, f := range files {
		assert.True(t, seen[filepath.Base(f)], "no case for %s", f)
	}
}

func TestParseCgroupPath(t *testing.T) {
	tests := []struct {
		path string
		want Owner
	}{
		{"/", Owner{}},
		{"", Owner{}},
		{"/docker/" + idDocker, Owner{ContainerID: idDocker}},
		{"/docker/" + idDocker + "/init.scope", Owner{ContainerID: idDocker}},
		{"/ecs/5a9c8e1b/" + idDocker, Owner{ContainerID: idDocker}},
		{"/kubepods/pod" + uidCgroupfs + "/" + idCgroupfs, Owner{ContainerID: idCgroupfs, PodUID: uidCgroupfs}},
		{"/kubepods/besteffort/pod" + uidCgroupfs, Owner{PodUID: uidCgroupfs}},
		{"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + strings.ReplaceAll(uidCgroupfs, "-", "_") + ".slice/docker-" + idDocker + ".scope",
			Owner{ContainerID: idDocker, PodUID: uidCgroupfs}},
		// The pod must be at or above the container.
		{"/docker/" + idDocker + "/pod" + uidCgroupfs, Owner{ContainerID: idDocker}},
		// Upper-case hex is not a runtime id; 63 or 65 digits are not either.
		{"/docker/" + strings.ToUpper(idDocker), Owner{}},
		{"/docker/" + idDocker[:63], Owner{}},
		{"/docker/" + idDocker + "0", Owner{}},
		// Mixed separators in a UID are not a UID.
		{"/kubepods/pod" + uidCgroupfs[:8] + "_" + uidCgroupfs[9:], Owner{}},
		{"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podnot-a-uid.slice", Owner{}},
		// A systemd unit whose name ends in digits is no container.
		{"/system.slice/run-r1234.scope", Owner{}},
		{"/system.slice/libpod-conmon-" + idPodman + ".scope", Owner{}},
	}
	for i, tt := range tests {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			assert.Equal(t, tt.want, parseCgroupPath(tt.path), tt.path)
		})
	}
}

func TestParseSlurmPath(t *testing.T) {
	tests := []struct {
		path      string
		job, step string
	}{
		{"/system.slice/slurmstepd.scope/job_1/step_0/user/task_0", "1", "0"},
		{"/system.slice/slurmstepd.scope/job_4294967295/step_4294967294", "4294967295", "4294967294"},
		{"/system.slice/slurmstepd.scope/job_4711", "4711", ""},
		{"/slurm/uid_0/job_9/step_extern", "9", "extern"},
		{"/slurm_n1/uid_1000/job_9/step_batch/task_0", "9", "batch"},
		// Not Slurm's, or not a job id.
		{"/system.slice/slurmstepd.scope/job_4294967296/step_0", "", ""},
		{"/system.slice/slurmstepd.scope/job_0/step_0", "", ""},
		{"/system.slice/slurmstepd.scope/job_0123/step_0", "", ""},
		{"/system.slice/slurmstepd.scope/job_-1/step_0", "", ""},
		{"/system.slice/slurmstepd.scope/job_/step_0", "", ""},
		{"/system.slice/slurmstepd.scope/jobs_1/step_0", "", ""},
		{"/system.slice/notslurmstepd.scope/job_1/step_0", "", ""},
		{"/system.slice/_slurmstepd.scope/job_1/step_0", "", ""},
		{"/slurm_/uid_1000/job_9/step_0", "", ""},
		{"/slurm/job_9/step_0", "", ""},
		{"/slurm/uid_/job_9/step_0", "", ""},
		{"/other/uid_1000/job_9/step_0", "", ""},
		{"/job_9/step_0", "", ""},
		{"job_9", "", ""},
		{"", "", ""},
		// A step that is not one: the job alone.
		{"/system.slice/slurmstepd.scope/job_5/step_01", "5", ""},
		{"/system.slice/slurmstepd.scope/job_5/step_other", "5", ""},
		{"/system.slice/slurmstepd.scope/job_5/user/task_0", "5", ""},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			job, step, ok := parseSlurmPath(tt.path)
			assert.Equal(t, tt.job != "", ok)
			assert.Equal(t, tt.job, job)
			assert.Equal(t, tt.step, step)
		})
	}
}

func TestResolveProcess(t *testing.T) {
	root := fakeProc(t, map[int]string{
		4242: "containerd-v2-systemd-burstable.txt",
		77:   "host-v2-user-session.txt",
		9:    "garbage.txt",
	})
	o, err := resolveProcess(root, 4242)
	require.NoError(t, err)
	assert.Equal(t, Owner{ContainerID: idBurstable, PodUID: uidBurstable}, o)

	o, err = resolveProcess(root, 77)
	require.NoError(t, err)
	assert.True(t, o.IsZero())

	_, err = resolveProcess(root, 9)
	require.Error(t, err)
	assert.False(t, errors.Is(err, ErrProcessNotFound))

	for _, pid := range []int{5, 0, -1} {
		_, err = resolveProcess(root, pid)
		assert.ErrorIs(t, err, ErrProcessNotFound, "pid %d", pid)
	}
	_, err = resolveProcess(root, 5)
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// fakeProc builds a proc root whose <pid>/cgroup files are copies of
// testdata/cgroup files.
func fakeProc(t *testing.T, pids map[int]string) string {
	t.Helper()
	root := t.TempDir()
	for pid, file := range pids {
		data, err := os.ReadFile(filepath.Join("testdata", "cgroup", file))
		require.NoError(t, err)
		dir := filepath.Join(root, strconv.Itoa(pid))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "cgroup"), data, 0o644))
	}
	return root
}

// A path outside Slurm's tree, read for every GPU process every scrape,
// costs no allocation.
func TestParseSlurmPathAllocatesNothingOutsideSlurm(t *testing.T) {
	path := "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod5f0c7a1e_2b3c_4d5e_8f90_a1b2c3d4e5f6.slice/cri-containerd-aa11bb22cc33dd44ee55ff6600112233445566778899aabbccddeeff00112233.scope"
	if n := testing.AllocsPerRun(100, func() { parseSlurmPath(path) }); n != 0 {
		t.Errorf("parseSlurmPath(a pod's path): %v allocations, want 0", n)
	}
}
