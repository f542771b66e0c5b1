-- Argo CD health of a cleanup.fleetops.dev CleanupPolicy.
--
-- The operator reports kstatus conditions: Ready is always present,
-- Reconciling and Stalled only while true, and status.observedGeneration is
-- the generation the status describes. On every status the operator writes,
-- the answer is kstatus's (Flux, kubectl wait, cli-utils):
--
--   generation not observed yet            Progressing   (kstatus InProgress)
--   Stalled=True                           Degraded      (kstatus Failed)
--   Reconciling=True                       Progressing   (kstatus InProgress)
--   Ready missing, False or Unknown        Progressing   (kstatus InProgress)
--   Ready=True                             Healthy       (kstatus Current)
--
-- spec.suspend true is Suspended, whatever the status says, and is read
-- first: the operator writes the status once when suspend turns true and
-- not again while it stays true, so that status may describe an older
-- generation (kstatus: Current right after the suspend, InProgress after
-- an edit made while suspended).
--
-- A policy with no status yet is Progressing here; kstatus calls it Current,
-- as it cannot tell it from a resource with no status to report.
-- Stalled is read before Reconciling: a policy that cannot make progress
-- needs a person, and says which field is wrong.
--
-- A policy being deleted never reaches this script: Argo CD answers
-- Progressing, "Pending deletion", for any object being deleted before it
-- runs a health check.
--
-- Argo CD runs a custom health check with Lua's base, package and table
-- libraries only (and a subset of os): there is no string library, so
-- numbers are joined into messages with .. and never formatted with
-- string.format.
local hs = {}

local function describe(c)
  local reason = c.reason or ""
  local message = c.message or ""
  if reason ~= "" and message ~= "" then
    return reason .. ": " .. message
  end
  if message ~= "" then
    return message
  end
  return reason
end

local function count(n)
  if type(n) ~= "number" then
    return 0
  end
  return n
end

local metadata = obj.metadata or {}
local spec = obj.spec or {}
if spec.suspend == true then
  hs.status = "Suspended"
  hs.message = "spec.suspend is true: the operator writes nothing for what the policy governs until it is resumed"
  return hs
end

local status = obj.status
if status == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to report the policy's status"
  return hs
end

local generation = metadata.generation
local observed = status.observedGeneration
if generation ~= nil and observed ~= generation then
  hs.status = "Progressing"
  if observed == nil then
    hs.message = "Waiting for the operator to observe generation " .. generation
  else
    hs.message = "Waiting for the operator to observe generation " .. generation ..
      " (the status describes generation " .. observed .. ")"
  end
  return hs
end

local conditions = {}
for _, c in ipairs(status.conditions or {}) do
  if c.type ~= nil then
    conditions[c.type] = c
  end
end

local stalled = conditions["Stalled"]
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = describe(stalled)
  return hs
end

local reconciling = conditions["Reconciling"]
if reconciling ~= nil and reconciling.status == "True" then
  hs.status = "Progressing"
  hs.message = describe(reconciling)
  return hs
end

local ready = conditions["Ready"]
if ready == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the Ready condition"
  return hs
end
if generation ~= nil and ready.observedGeneration ~= nil and ready.observedGeneration ~= generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the Ready condition of generation " .. generation
  return hs
end
if ready.status ~= "True" then
  hs.status = "Progressing"
  hs.message = describe(ready)
  return hs
end

-- Ready: the policy compiled and governs its clusters. What it could not
-- write on other objects is said, not counted against its health: those
-- objects carry Events saying why.
hs.status = "Healthy"
local notes = {}
if spec.dryRun == true then
  table.insert(notes, "dry run: " .. count(status.dryRunPending) .. " object(s) would change")
end
if count(status.conflicts) > 0 then
  table.insert(notes, count(status.conflicts) .. " object(s) in conflict with another field manager")
end
if count(status.contested) > 0 then
  table.insert(notes, count(status.contested) .. " object(s) contested by another controller")
end
if count(status.writeFailed) > 0 then
  table.insert(notes, count(status.writeFailed) .. " object(s) whose write the API server refused")
end
if count(status.templatesNotReadingDecisions) > 0 then
  table.insert(notes, count(status.templatesNotReadingDecisions) .. " Policy template(s) do not read cleanup-decisions")
end
local message = ready.message or ""
if message == "" then
  message = "Ready"
end
if #notes > 0 then
  message = message .. "; " .. table.concat(notes, "; ")
end
hs.message = message
return hs
