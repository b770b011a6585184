"""Vocabulary of the synthetic demo corpus: topics with their own words, and when each topic is talked about.

Each topic has a popularity curve over time (``peak`` year and ``width`` in years, or ``start`` for topics
that only exist from a date on), so text before the demo window differs from text inside it in topics and
vocabulary, as real text drifts.
"""

from __future__ import annotations

# ---- abstracts (bioRxiv-like) -------------------------------------------------------------------------------
ABSTRACT_TOPICS: dict[str, dict] = {
    "neuroscience": dict(
        peak=2021.0, width=4.0,
        entity=["dopaminergic neurons", "hippocampal place cells", "cortical interneurons", "synaptic vesicle release", "microglial pruning", "theta oscillations"],
        system=["the mouse hippocampus", "zebrafish larvae", "human cortical organoids", "the rat prefrontal cortex", "Drosophila mushroom bodies"],
        technique=["two-photon calcium imaging", "optogenetic silencing", "high-density Neuropixels recordings", "patch-clamp electrophysiology"],
        target=["memory consolidation", "reward prediction errors", "sensory adaptation", "sleep-dependent plasticity"],
        context="neural circuit function",
    ),
    "genomics": dict(
        peak=2020.0, width=4.0,
        entity=["structural variants", "enhancer elements", "long noncoding RNAs", "copy number changes", "regulatory haplotypes"],
        system=["a cohort of 3,000 genomes", "human lymphoblastoid cell lines", "maize inbred lines", "ancient human remains"],
        technique=["long-read sequencing", "genome-wide association analysis", "chromatin accessibility profiling", "massively parallel reporter assays"],
        target=["gene expression variation", "disease risk", "local adaptation", "recombination rate"],
        context="genome regulation",
    ),
    "covid": dict(
        peak=2021.0, width=1.3,
        entity=["SARS-CoV-2 spike variants", "neutralising antibodies", "viral shedding", "the Omicron lineage", "mRNA vaccine responses"],
        system=["hospitalised patients", "vaccinated health care workers", "hamster infection models", "wastewater samples"],
        technique=["pseudovirus neutralisation assays", "genomic surveillance", "serological testing", "contact tracing data"],
        target=["transmission", "immune escape", "disease severity", "waning immunity"],
        context="the COVID-19 pandemic",
    ),
    "ecology": dict(
        peak=2022.0, width=5.0,
        entity=["pollinator communities", "coral bleaching", "soil microbial diversity", "invasive plant species", "predator abundance"],
        system=["tropical forest plots", "alpine meadows", "coastal reef transects", "agricultural landscapes"],
        technique=["camera trap surveys", "environmental DNA metabarcoding", "long-term field monitoring", "species distribution models"],
        target=["ecosystem resilience", "species turnover", "carbon storage", "range shifts under warming"],
        context="biodiversity loss",
    ),
    "immunology": dict(
        peak=2022.5, width=4.0,
        entity=["tissue-resident memory T cells", "regulatory T cells", "germinal centre B cells", "innate lymphoid cells", "interferon signalling"],
        system=["mouse models of colitis", "human tonsil tissue", "tumour biopsies", "peripheral blood of patients"],
        technique=["single-cell RNA sequencing", "spectral flow cytometry", "CRISPR screens in primary cells", "antigen receptor repertoire sequencing"],
        target=["autoimmunity", "antitumour immunity", "vaccine durability", "chronic inflammation"],
        context="immune regulation",
    ),
    # Topics that emerge inside the demo window: vocabulary a public-only model has never seen.
    "avian_influenza": dict(
        start=2024.3, peak=2025.3, width=0.8,
        entity=["H5N1 clade 2.3.4.4b viruses", "bovine H5N1 isolates", "mammalian adaptation markers", "the PB2 E627K substitution"],
        system=["dairy cattle herds", "raw milk samples", "farm workers", "wild bird surveillance"],
        technique=["herd-level genomic surveillance", "milk viral load testing", "ferret transmission studies", "phylodynamic reconstruction"],
        target=["cross-species spillover", "udder tropism", "pandemic risk", "herd-to-herd spread"],
        context="the H5N1 outbreak in dairy cattle",
    ),
    "protein_language_models": dict(
        start=2024.0, peak=2025.5, width=1.0,
        entity=["protein language model embeddings", "designed binders", "zero-shot variant effect scores", "generative enzyme designs"],
        system=["deep mutational scanning data", "the Protein Data Bank", "metagenomic protein families", "antibody repertoires"],
        technique=["fine-tuned ESM models", "diffusion-based backbone generation", "inverse folding", "structure-conditioned sampling"],
        target=["protein fitness", "binding specificity", "thermostability", "de novo function"],
        context="machine learning for protein design",
    ),
    "spatial_omics": dict(
        start=2023.8, peak=2025.4, width=1.2,
        entity=["spatial transcriptomic niches", "cell neighbourhood graphs", "subcellular transcript maps", "tissue domains"],
        system=["human kidney sections", "developing mouse brain", "tumour microenvironments", "lymph node atlases"],
        technique=["Visium HD profiling", "Xenium in situ imaging", "spatial deconvolution", "graph neural networks on tissue"],
        target=["cell-cell communication", "tissue architecture", "spatial heterogeneity", "niche remodelling"],
        context="spatially resolved biology",
    ),
    "glp1": dict(
        start=2024.0, peak=2025.6, width=1.0,
        entity=["GLP-1 receptor agonists", "semaglutide exposure", "tirzepatide treatment", "incretin signalling"],
        system=["adults with obesity", "electronic health records", "diet-induced obese mice", "real-world cohorts"],
        technique=["target trial emulation", "hypothalamic single-nucleus sequencing", "pharmacovigilance analysis", "metabolic cage studies"],
        target=["weight loss", "alcohol use", "cardiovascular outcomes", "appetite regulation"],
        context="incretin-based therapies",
    ),
}

ABSTRACT_OPENINGS = [
    "{Context} remains poorly understood despite intense study.",
    "Understanding {target} is a central problem in {context}.",
    "How {entity} shape {target} in {system} is unknown.",
    "{Entity} are thought to control {target}, but direct evidence is limited.",
]
ABSTRACT_METHODS = [
    "Here we combined {technique} with {technique2} to study {entity} in {system}.",
    "Here we used {technique} to map {entity} across {system}.",
    "We applied {technique} to {system} and quantified {entity}.",
]
ABSTRACT_FINDINGS = [
    "We found that {entity} strongly predict {target}.",
    "We show that {entity} are required for {target} in {system}.",
    "Loss of {entity} reduced {target} by nearly half.",
    "{Entity} increased with {target} across {system}.",
    "Surprisingly, {entity} were dispensable for {target}.",
    "Using {technique2}, we confirmed that {entity} drive {target}.",
]
ABSTRACT_CLOSINGS = [
    "These results reveal a new link between {entity} and {target}.",
    "Our findings suggest that {entity} could guide new approaches to {context}.",
    "Together, this work provides a resource for studying {target} in {system}.",
]

# ---- speeches (parliament-like) ---------------------------------------------------------------------------
SPEECH_TOPICS: dict[str, dict] = {
    "health_care": dict(
        peak=2020.5, width=4.0,
        issue=["hospital waiting lists", "the cost of prescription drugs", "rural clinics closing", "mental health services"],
        measure=["the Health Care Access Act", "new funding for community hospitals", "a cap on insulin prices"],
        people=["patients", "nurses", "seniors", "families"],
    ),
    "economy": dict(
        peak=2022.0, width=3.0,
        issue=["inflation at the grocery store", "rising interest rates", "small businesses struggling to hire", "the cost of living"],
        measure=["targeted relief for working families", "the Small Business Recovery Act", "a freeze on fuel duty"],
        people=["workers", "small business owners", "pensioners", "young people"],
    ),
    "pandemic": dict(
        peak=2020.7, width=0.9,
        issue=["the pandemic response", "vaccine distribution", "lockdown support for businesses", "testing capacity"],
        measure=["the emergency relief package", "the furlough scheme", "the vaccine rollout plan"],
        people=["front-line workers", "care home residents", "restaurant owners", "parents"],
    ),
    "housing": dict(
        peak=2023.0, width=3.0,
        issue=["the housing shortage", "soaring rents", "homelessness in our cities", "the price of a first home"],
        measure=["the Affordable Housing Act", "a national housing strategy", "new rules on short-term rentals"],
        people=["renters", "first-time buyers", "students", "families"],
    ),
    "climate": dict(
        peak=2021.5, width=4.0,
        issue=["wildfire season", "flooding in coastal towns", "the transition to clean energy", "extreme heat"],
        measure=["the Clean Energy Investment Act", "a carbon pricing plan", "funding for flood defences"],
        people=["farmers", "coastal communities", "energy workers", "firefighters"],
    ),
    # Topics of the demo window.
    "ai_regulation": dict(
        start=2024.0, peak=2025.4, width=1.0,
        issue=["deepfake election advertising", "frontier AI model safety", "AI systems replacing call centre jobs", "algorithmic decisions on benefits"],
        measure=["the Artificial Intelligence Accountability Act", "an AI Safety Institute", "mandatory watermarking of synthetic media"],
        people=["voters", "software developers", "call centre workers", "artists"],
    ),
    "tariffs": dict(
        start=2024.9, peak=2025.5, width=0.6,
        issue=["the new steel and aluminium tariffs", "retaliatory duties on farm exports", "cross-border supply chains", "the trade dispute"],
        measure=["emergency support for exporters", "the Tariff Relief Act", "a review of trade agreements"],
        people=["autoworkers", "farmers", "manufacturers", "exporters"],
    ),
    "bird_flu": dict(
        start=2024.3, peak=2025.2, width=0.8,
        issue=["bird flu on dairy farms", "the price of eggs", "culling of poultry flocks", "testing of raw milk"],
        measure=["compensation for affected farmers", "expanded herd testing", "the Animal Disease Preparedness Act"],
        people=["dairy farmers", "poultry producers", "consumers", "veterinarians"],
    ),
}

SPEECH_OPENINGS = {
    ("USA", "House"): ["Madam Speaker, I rise today to talk about {issue}.", "Mr. Speaker, I rise in support of {measure}."],
    ("USA", "Senate"): ["Mr. President, I come to the floor today to discuss {issue}.", "Madam President, I rise to speak on {measure}."],
    ("GBR", "Commons"): ["Thank you, Mr Speaker. My constituents are deeply worried about {issue}.", "I thank the Minister for her statement on {issue}."],
    ("GBR", "Lords"): ["My Lords, I am grateful to the noble Lord for raising {issue}.", "My Lords, the Government's approach to {issue} deserves scrutiny."],
    ("CAN", "House of Commons"): ["Mr. Speaker, Canadians are worried about {issue}.", "Madam Speaker, I am pleased to rise today to speak to {measure}."],
}
SPEECH_BODY = [
    "{People} in {place} have told me about {issue}.",
    "{Measure} would make a real difference for {people}.",
    "We cannot ignore {issue} any longer.",
    "The government must explain how it will address {issue}.",
    "Last week I met {people} from {place} who are affected by {issue}.",
    "Under {measure}, {people} would finally get the support they need.",
    "This is not a partisan issue; {people} across the country are asking for action.",
    "The evidence on {issue} is clear.",
]
SPEECH_CLOSINGS = [
    "I urge my colleagues to support {measure}.",
    "I hope the Minister will commit to acting on {issue}.",
    "The people of {place} deserve nothing less.",
    "I yield back the balance of my time.",
]

PLACES = {
    "USA": ["Ohio", "Texas", "Georgia", "Michigan", "Arizona", "Iowa", "Oregon", "Pennsylvania", "Wisconsin", "Nevada"],
    "GBR": ["Leeds", "Cornwall", "Glasgow", "Swansea", "Kent", "Newcastle", "Norfolk", "Belfast", "Bristol", "Derby"],
    "CAN": ["Nova Scotia", "Saskatoon", "northern Ontario", "Quebec City", "Surrey", "Calgary", "Winnipeg", "Halifax", "Moncton", "Kelowna"],
}
CHAMBERS = {"USA": ["House", "Senate"], "GBR": ["Commons", "Lords"], "CAN": ["House of Commons"]}
FIRST_NAMES = ["James", "Maria", "David", "Aisha", "Robert", "Chen", "Sarah", "Liam", "Priya", "Thomas", "Fatima", "Michael",
               "Emma", "Daniel", "Grace", "Omar", "Julia", "Samuel", "Hannah", "Lucas"]
LAST_NAMES = ["Smith", "Garcia", "Okafor", "MacDonald", "Nguyen", "Patel", "Tremblay", "Jones", "Kowalski", "Murphy",
              "Singh", "Roy", "Evans", "Cohen", "Martin", "Walker", "Gagnon", "Hughes", "Ali", "Bennett"]


#: Phrases that name a topic of the demo window (the topics above with ``start``), lower case: what the private
#: clients of ``demo-prose`` talk about and its pre-window records rarely do. They measure how many synthetic samples
#: reach the window's topics (the harness's topic share on the demos) and check that the generic public corpus,
#: written for any domain, names none of them.
PRIVATE_TOPIC_MARKERS: dict[str, tuple[str, ...]] = {
    "avian_influenza": ("h5n1", "avian influenza", "raw milk", "dairy cattle"),
    "protein_language_models": ("protein language model",),
    "spatial_omics": ("spatial transcriptom",),
    "glp1": ("glp-1", "semaglutide", "tirzepatide", "incretin"),
    "ai_regulation": ("deepfake", "ai safety", "frontier ai", "watermark", "call centre"),
    "tariffs": ("tariff", "trade dispute", "retaliatory", "steel and aluminium"),
    "bird_flu": ("bird flu", "poultry", "culling"),
}


def private_topics_named(text: str) -> list[str]:
    """The demo-window topics whose marker phrases ``text`` contains."""
    low = text.lower()
    return [topic for topic, markers in PRIVATE_TOPIC_MARKERS.items() if any(m in low for m in markers)]


def private_topic_share(texts: list[str]) -> float:
    """The share of ``texts`` that name at least one demo-window topic."""
    return sum(1 for t in texts if private_topics_named(t)) / len(texts) if texts else 0.0
