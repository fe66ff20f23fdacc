package attribution

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSingleOwner(t *testing.T) {
	ctrA := Owner{ContainerID: idBurstable, PodUID: uidBurstable}
	ctrA2 := Owner{ContainerID: idGuaranteed, PodUID: uidBurstable} // same pod, another container
	ctrB := Owner{ContainerID: idCRIO, PodUID: uidCRIO}
	docker := Owner{ContainerID: idDocker}
	docker2 := Owner{ContainerID: idDockerV2}
	host := Owner{}
	allocMain := Owner{PodName: "trainer-0", Namespace: "ml", ContainerName: "main"}
	allocSidecar := Owner{PodName: "trainer-0", Namespace: "ml", ContainerName: "sidecar"}
	allocOther := Owner{PodName: "llm-0", Namespace: "serve", ContainerName: "main"}
	job0 := Owner{SlurmJobID: "4711", SlurmStep: "0"}
	job1 := Owner{SlurmJobID: "4711", SlurmStep: "1"}
	jobOther := Owner{SlurmJobID: "4720", SlurmStep: "0"}

	tests := []struct {
		name   string
		owners []Owner
		want   Owner
		ok     bool
	}{
		{name: "none"},
		{name: "one container", owners: []Owner{ctrA}, want: ctrA, ok: true},
		{name: "one container, many processes", owners: []Owner{ctrA, ctrA, ctrA}, want: ctrA, ok: true},
		{name: "one pod, two containers", owners: []Owner{ctrA, ctrA2}, want: Owner{PodUID: uidBurstable}, ok: true},
		{name: "two pods", owners: []Owner{ctrA, ctrB}},
		{name: "docker container", owners: []Owner{docker, docker}, want: docker, ok: true},
		{name: "two docker containers", owners: []Owner{docker, docker2}},
		{name: "container and host", owners: []Owner{docker, host}},
		{name: "pod and host", owners: []Owner{ctrA, host}},
		{name: "host only", owners: []Owner{host, host}},
		{name: "allocation, one container", owners: []Owner{allocMain}, want: allocMain, ok: true},
		{name: "allocation, one pod", owners: []Owner{allocMain, allocSidecar},
			want: Owner{PodName: "trainer-0", Namespace: "ml"}, ok: true},
		{name: "allocation, two pods", owners: []Owner{allocMain, allocOther}},
		{name: "one Slurm step", owners: []Owner{job0, job0}, want: job0, ok: true},
		{name: "one Slurm job, two steps", owners: []Owner{job0, job1, job0}, want: Owner{SlurmJobID: "4711"}, ok: true},
		{name: "two Slurm jobs", owners: []Owner{job0, jobOther}},
		{name: "Slurm job and host", owners: []Owner{job0, host}},
		{name: "Slurm job and pod", owners: []Owner{job0, ctrA}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := singleOwner(tt.owners)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestGPUOwner(t *testing.T) {
	procA := Owner{ContainerID: idBurstable, PodUID: uidBurstable}
	procA2 := Owner{ContainerID: idGuaranteed, PodUID: uidBurstable}
	procB := Owner{ContainerID: idCRIO, PodUID: uidCRIO}
	docker := Owner{ContainerID: idDocker}
	allocMain := Owner{PodName: "trainer-0", Namespace: "ml", ContainerName: "main"}
	allocSidecar := Owner{PodName: "trainer-0", Namespace: "ml", ContainerName: "sidecar"}
	allocOther := Owner{PodName: "llm-0", Namespace: "serve", ContainerName: "main"}
	full := Owner{ContainerID: idBurstable, PodUID: uidBurstable, PodName: "trainer-0", Namespace: "ml", ContainerName: "main"}
	slurmAlloc := Owner{SlurmJobID: "4711", UserName: "alice"}
	slurmStep0 := Owner{SlurmJobID: "4711", SlurmStep: "0"}

	tests := []struct {
		name        string
		alloc, proc []Owner
		want        Owner
		ok          bool
	}{
		{name: "nothing"},
		{name: "processes only", proc: []Owner{procA, procA}, want: procA, ok: true},
		{name: "processes of two pods only", proc: []Owner{procA, procB}},
		{name: "docker only", proc: []Owner{docker}, want: docker, ok: true},
		{name: "allocation only (idle GPU, or PIDs unresolvable)", alloc: []Owner{allocMain}, want: allocMain, ok: true},
		{name: "allocation and its processes", alloc: []Owner{allocMain}, proc: []Owner{procA, procA}, want: full, ok: true},
		{name: "one pod, processes in two containers", alloc: []Owner{allocMain}, proc: []Owner{procA, procA2},
			want: Owner{PodUID: uidBurstable, PodName: "trainer-0", Namespace: "ml"}, ok: true},
		{name: "one pod, allocation to two containers", alloc: []Owner{allocMain, allocSidecar}, proc: []Owner{procA},
			want: Owner{PodUID: uidBurstable, PodName: "trainer-0", Namespace: "ml"}, ok: true},
		{name: "time-sliced between pods", alloc: []Owner{allocMain, allocOther}, proc: []Owner{procA}},
		{name: "allocated, and another pod's process too", alloc: []Owner{allocMain}, proc: []Owner{procA, procB}},
		{name: "allocated, and a host process too", alloc: []Owner{allocMain}, proc: []Owner{procA, {}}},
		{name: "allocated, used by a plain docker container", alloc: []Owner{allocMain}, proc: []Owner{docker}},
		// Slurm's prolog allocated the GPU (gpustat.go).
		{name: "Slurm job, no process", alloc: []Owner{slurmAlloc}, want: slurmAlloc, ok: true},
		{name: "Slurm job and its process", alloc: []Owner{slurmAlloc}, proc: []Owner{slurmStep0},
			want: Owner{SlurmJobID: "4711", SlurmStep: "0", UserName: "alice"}, ok: true},
		{name: "Slurm job and its processes in two steps", alloc: []Owner{slurmAlloc},
			proc: []Owner{slurmStep0, {SlurmJobID: "4711", SlurmStep: "batch"}}, want: slurmAlloc, ok: true},
		{name: "Slurm job, another job's process", alloc: []Owner{slurmAlloc}, proc: []Owner{{SlurmJobID: "4720", SlurmStep: "0"}}},
		{name: "Slurm job, its process and another job's", alloc: []Owner{slurmAlloc},
			proc: []Owner{slurmStep0, {SlurmJobID: "4720", SlurmStep: "0"}}},
		{name: "Slurm job, a pod's process", alloc: []Owner{slurmAlloc}, proc: []Owner{procA}},
		{name: "Slurm job, a docker container's process", alloc: []Owner{slurmAlloc}, proc: []Owner{docker}},
		{name: "Slurm job and a pod both allocated", alloc: []Owner{allocMain, slurmAlloc}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := gpuOwner(tt.alloc, tt.proc)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}
