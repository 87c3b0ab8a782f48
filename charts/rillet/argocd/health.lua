-- Argo CD health of Rillet objects (Topic, Table, App), read as kstatus reads them:
--   Stalled=True                     -> Degraded (needs the user; the message says what to do)
--   Reconciling=False, paused        -> Suspended (a paused Topic or Table, a suspended App)
--   Ready=True, generation observed  -> Healthy
--   anything else                    -> Progressing (the operator is working on it)
-- Install: argocd-cm keys resource.customizations.health.rillet.io_Topic (and _Table, _App),
-- each holding this script (see README.md beside it).
local hs = {status = "Progressing", message = "Waiting for the Rillet operator"}
if obj.status == nil then
  return hs
end
local generation = obj.metadata.generation
if generation ~= nil and obj.status.observedGeneration ~= generation then
  hs.message = "Waiting for the Rillet operator to act on generation " .. generation
  return hs
end
local conditions = {}
if obj.status.conditions ~= nil then
  for _, condition in ipairs(obj.status.conditions) do
    conditions[condition.type] = condition
  end
end
local stalled, ready, reconciling = conditions["Stalled"], conditions["Ready"], conditions["Reconciling"]
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = stalled.reason .. ": " .. (stalled.message or "")
  return hs
end
-- ReconciliationPaused: a Topic or Table annotated rillet.io/paused; Suspended: an App with
-- spec.suspend (nothing runs, on purpose: not Progressing, which would never end).
if reconciling ~= nil and reconciling.status ~= "True" and
    (reconciling.reason == "ReconciliationPaused" or reconciling.reason == "Suspended") then
  hs.status = "Suspended"
  hs.message = reconciling.message or "Reconciliation paused"
  return hs
end
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = ready.message or ""
  return hs
end
if ready ~= nil then
  hs.message = ready.reason .. ": " .. (ready.message or "")
end
return hs
